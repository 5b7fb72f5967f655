//! MUBUF/MTBUF semantics on a single wave: addressing through hand-built buffer resource
//! descriptors, range checking (raw and structured), sub-dword and wide accesses, atomics and
//! format conversion. Encodings from llvm-mc-19 (hard-coded); expected values are computed
//! here from the ISA's rules, lane by lane.

mod common;

use common::{Buffer, HostMemory};
use rdna3::decode::decode;
use rdna3::exec::{ExecContext, Flow, Wave};
use rdna3::operand::EXEC_LO;
use rdna3::FaultKind;

/// OOB_SELECT values of the descriptor's word 3.
const STRUCTURED_WITH_OFFSET: u32 = 0;
const STRUCTURED: u32 = 1;
const RAW: u32 = 3;

/// Descriptor words: base, stride, num_records, data format, add_tid_enable, OOB_SELECT.
fn descriptor(
    base: u64,
    stride: u32,
    num_records: u32,
    format: u32,
    add_tid: bool,
    oob_select: u32,
) -> [u32; 4] {
    [
        base as u32,
        ((base >> 32) as u32 & 0xffff) | (stride << 16),
        num_records,
        (format << 12) | (u32::from(add_tid) << 23) | (oob_select << 28),
    ]
}

fn raw(base: &Buffer, num_records: u32) -> [u32; 4] {
    descriptor(base.addr(), 0, num_records, 0, false, RAW)
}

fn wave(resource: [u32; 4]) -> Wave {
    let mut wave = Wave::new(0x1000);
    wave.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    wave.sgpr[4..8].copy_from_slice(&resource);
    wave
}

fn run(words: &[u32], wave: &mut Wave, buffers: &[&Buffer]) -> Result<Flow, FaultKind> {
    let decoded = decode(words).unwrap();
    let mem = HostMemory::new(buffers);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    wave.execute(&mut ctx, &decoded.inst, decoded.words as u64 * 4)
}

fn set_lanes(wave: &mut Wave, reg: usize, f: impl Fn(usize) -> u32) {
    for lane in 0..32 {
        wave.vgpr[reg][lane] = f(lane);
    }
}

/// `count` distinct dwords.
fn pattern(count: usize) -> Vec<u32> {
    (0..count as u32)
        .map(|i| 0x1000_0000 + i * 0x0101_0101)
        .collect()
}

/// The dword at byte `offset` of `data` (little-endian, any alignment).
fn dword_at(data: &[u32], offset: usize) -> u32 {
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
}

const LOAD_B32_OFFEN: [u32; 2] = [0xe0500000, 0x80410001]; // buffer_load_b32 v0, v1, s[4:7], 0 offen

#[test]
fn raw_load_reads_zero_past_num_records() {
    let data = pattern(64);
    let memory = Buffer::from_u32s(&data);
    let num_records = 40;
    let mut w = wave(raw(&memory, num_records));
    // In range, straddling the end, and far outside any mapping (must not fault).
    let offset = |lane: usize| match lane {
        0..=11 => lane as u32 * 4,
        12 => 38,
        13 => 1 << 20,
        _ => (lane as u32 * 4) % 64,
    };
    set_lanes(&mut w, 1, offset);
    run(&LOAD_B32_OFFEN, &mut w, &[&memory]).unwrap();
    for lane in 0..32 {
        let at = offset(lane) as usize;
        let expected = if at + 4 <= num_records as usize {
            dword_at(&data, at)
        } else {
            0
        };
        assert_eq!(w.vgpr[0][lane], expected, "lane {lane}");
    }
}

#[test]
fn raw_range_check_counts_scalar_and_instruction_offsets() {
    let data = pattern(32);
    let memory = Buffer::from_u32s(&data);
    let num_records = 64;
    let mut w = wave(raw(&memory, num_records));
    w.sgpr[8] = 12;
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    run(&[0xe0500004, 0x08410001], &mut w, &[&memory]).unwrap(); // buffer_load_b32 v0, v1, s[4:7], s8 offen offset:4
    for lane in 0..32 {
        let at = 12 + lane * 4 + 4;
        let expected = if at + 4 <= num_records as usize {
            dword_at(&data, at)
        } else {
            0
        };
        assert_eq!(w.vgpr[0][lane], expected, "lane {lane}");
    }
}

#[test]
fn raw_store_drops_out_of_range_lanes_and_respects_exec() {
    let memory = Buffer::from_u32s(&[0xdead_beef; 32]);
    let num_records = 20;
    let mut w = wave(raw(&memory, num_records));
    w.sgpr[usize::from(EXEC_LO)] = 0xffff_fffd;
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    set_lanes(&mut w, 2, |lane| 100 + lane as u32);
    run(&[0xe0680000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_store_b32 v2, v1, s[4:7], 0 offen
    let stored = memory.u32s();
    for (element, value) in stored.iter().enumerate() {
        let written = element * 4 + 4 <= num_records as usize && element != 1;
        let expected = if written {
            100 + element as u32
        } else {
            0xdead_beef
        };
        assert_eq!(*value, expected, "element {element}");
    }
}

#[test]
fn wide_accesses_are_range_checked_per_dword() {
    let data = pattern(16);
    let memory = Buffer::from_u32s(&data);
    let num_records = 20;
    let mut w = wave(raw(&memory, num_records));
    w.sgpr[usize::from(EXEC_LO)] = 1;
    w.vgpr[1][0] = 8;
    run(&[0xe05c0000, 0x80410401], &mut w, &[&memory]).unwrap(); // buffer_load_b128 v[4:7], v1, s[4:7], 0 offen
    for k in 0..4 {
        let at = 8 + 4 * k;
        let expected = if at + 4 <= 20 { dword_at(&data, at) } else { 0 };
        assert_eq!(w.vgpr[4 + k][0], expected, "dword {k}");
    }
    w.vgpr[1][0] = 16;
    w.vgpr[4][0] = 0xaaaa_aaaa;
    w.vgpr[5][0] = 0xbbbb_bbbb;
    run(&[0xe06c0000, 0x80410401], &mut w, &[&memory]).unwrap(); // buffer_store_b64 v[4:5], v1, s[4:7], 0 offen
    let stored = memory.u32s();
    assert_eq!(stored[4], 0xaaaa_aaaa, "in-range dword stored");
    assert_eq!(stored[5], data[5], "out-of-range dword dropped");
}

#[test]
fn structured_buffers_check_the_index_and_the_record() {
    let data = pattern(64);
    let memory = Buffer::from_u32s(&data);
    let (stride, records) = (12u32, 5u32);
    // Index only: element at index * stride + 4.
    let mut w = wave(descriptor(
        memory.addr(),
        stride,
        records,
        0,
        false,
        STRUCTURED,
    ));
    set_lanes(&mut w, 1, |lane| lane as u32 % 8);
    run(&[0xe0500004, 0x80810001], &mut w, &[&memory]).unwrap(); // buffer_load_b32 v0, v1, s[4:7], 0 idxen offset:4
    for lane in 0..32 {
        let index = lane % 8;
        let expected = if index < records as usize {
            dword_at(&data, index * stride as usize + 4)
        } else {
            0
        };
        assert_eq!(w.vgpr[0][lane], expected, "structured lane {lane}");
    }
    // Index and offset, with the offset checked against the stride.
    let mut w = wave(descriptor(
        memory.addr(),
        stride,
        records,
        0,
        false,
        STRUCTURED_WITH_OFFSET,
    ));
    set_lanes(&mut w, 2, |lane| lane as u32 % 7);
    set_lanes(&mut w, 3, |lane| (lane as u32 / 7) * 4);
    run(&[0xe0500000, 0x80c10002], &mut w, &[&memory]).unwrap(); // buffer_load_b32 v0, v[2:3], s[4:7], 0 idxen offen
    for lane in 0..32 {
        let (index, offset) = (lane % 7, (lane / 7) * 4);
        let expected = if index < records as usize && offset + 4 <= stride as usize {
            dword_at(&data, index * stride as usize + offset)
        } else {
            0
        };
        assert_eq!(w.vgpr[0][lane], expected, "record lane {lane}");
    }
}

#[test]
fn add_tid_enable_indexes_by_lane() {
    let data = pattern(32);
    let memory = Buffer::from_u32s(&data);
    let mut w = wave(descriptor(memory.addr(), 4, 20, 0, true, STRUCTURED));
    run(&[0xe0500000, 0x80010000], &mut w, &[&memory]).unwrap(); // buffer_load_b32 v0, off, s[4:7], 0
    for (lane, element) in data.iter().enumerate() {
        let expected = if lane < 20 { *element } else { 0 };
        assert_eq!(w.vgpr[0][lane], expected, "lane {lane}");
    }
}

#[test]
fn sub_dword_loads_extend_and_d16_keeps_the_other_half() {
    let bytes: Vec<u8> = (0..64u8)
        .map(|b| b.wrapping_mul(37).wrapping_add(0x80))
        .collect();
    let memory = Buffer::from_bytes(&bytes);
    let mut w = wave(raw(&memory, 64));
    set_lanes(&mut w, 1, |lane| lane as u32 * 2);
    run(&[0xe0400000, 0x80410001], &mut w, &[&memory]).unwrap(); // buffer_load_u8 v0, v1, s[4:7], 0 offen
    for lane in 0..32 {
        assert_eq!(
            w.vgpr[0][lane],
            u32::from(bytes[lane * 2]),
            "u8 lane {lane}"
        );
    }
    run(&[0xe04c0000, 0x80410001], &mut w, &[&memory]).unwrap(); // buffer_load_i16 v0, v1, s[4:7], 0 offen
    for lane in 0..32 {
        let half = i16::from_le_bytes([bytes[lane * 2], bytes[lane * 2 + 1]]);
        assert_eq!(w.vgpr[0][lane], half as i32 as u32, "i16 lane {lane}");
    }
    set_lanes(&mut w, 0, |_| 0x1234_5678);
    run(&[0xe08c0000, 0x80410001], &mut w, &[&memory]).unwrap(); // buffer_load_d16_hi_b16 v0, v1, s[4:7], 0 offen
    for lane in 0..32 {
        let half = u16::from_le_bytes([bytes[lane * 2], bytes[lane * 2 + 1]]);
        assert_eq!(
            w.vgpr[0][lane],
            (u32::from(half) << 16) | 0x5678,
            "d16_hi lane {lane}"
        );
    }
    set_lanes(&mut w, 2, |lane| 0xffff_ff00 | lane as u32);
    set_lanes(&mut w, 1, |lane| lane as u32);
    run(&[0xe0600000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_store_b8 v2, v1, s[4:7], 0 offen
    let stored = memory.read();
    for (lane, byte) in stored[..32].iter().enumerate() {
        assert_eq!(*byte, lane as u8, "store_b8 byte {lane}");
    }
    assert_eq!(
        &stored[32..],
        &bytes[32..],
        "bytes past the stores unchanged"
    );
}

#[test]
fn tfe_writes_a_zero_status_register() {
    let data = pattern(32);
    let memory = Buffer::from_u32s(&data);
    let mut w = wave(raw(&memory, 128));
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    w.vgpr[1][31] = 0; // lane 31 reads element 0 (v1 is also the status register)
    run(&[0xe0500000, 0x80610001], &mut w, &[&memory]).unwrap(); // buffer_load_b32 v[0:1], v1, s[4:7], 0 offen tfe
    for lane in 0..32 {
        let element = if lane == 31 { 0 } else { lane };
        assert_eq!(w.vgpr[0][lane], data[element], "data lane {lane}");
        assert_eq!(w.vgpr[1][lane], 0, "status lane {lane}");
    }
}

#[test]
fn atomics_return_the_old_value_and_skip_out_of_range_lanes() {
    let initial: Vec<u32> = (0..32).map(|i| i * 10).collect();
    let memory = Buffer::from_u32s(&initial);
    let num_records = 64; // elements 0..16
    let mut w = wave(raw(&memory, num_records));
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    set_lanes(&mut w, 2, |lane| lane as u32 + 1);
    run(&[0xe0d44000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_atomic_add_u32 v2, v1, s[4:7], 0 offen glc
    let after = memory.u32s();
    for lane in 0..32 {
        let in_range = lane * 4 + 4 <= num_records as usize;
        let expected_memory = if in_range {
            initial[lane] + lane as u32 + 1
        } else {
            initial[lane]
        };
        assert_eq!(after[lane], expected_memory, "memory {lane}");
        let returned = if in_range { initial[lane] } else { 0 };
        assert_eq!(w.vgpr[2][lane], returned, "returned {lane}");
    }
    // Compare-swap: lanes whose comparand matches store their new value.
    let before = memory.u32s();
    set_lanes(&mut w, 2, |lane| 1000 + lane as u32);
    set_lanes(
        &mut w,
        3,
        |lane| {
            if lane % 2 == 0 {
                before[lane]
            } else {
                7
            }
        },
    );
    run(&[0xe0d04000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_atomic_cmpswap_b32 v[2:3], v1, s[4:7], 0 offen glc
    let after = memory.u32s();
    for lane in 0..16 {
        let swapped = lane % 2 == 0;
        let expected = if swapped {
            1000 + lane as u32
        } else {
            before[lane]
        };
        assert_eq!(after[lane], expected, "cmpswap memory {lane}");
        assert_eq!(w.vgpr[2][lane], before[lane], "cmpswap returned {lane}");
    }
    // Without glc, the data registers keep their values.
    let before = memory.u32s();
    set_lanes(&mut w, 2, |lane| (lane as i32 - 8) as u32);
    run(&[0xe0e00000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_atomic_min_i32 v2, v1, s[4:7], 0 offen
    let after = memory.u32s();
    for lane in 0..16 {
        let expected = (before[lane] as i32).min(lane as i32 - 8) as u32;
        assert_eq!(after[lane], expected, "min memory {lane}");
        assert_eq!(w.vgpr[2][lane], (lane as i32 - 8) as u32, "min data {lane}");
    }
    let before = memory.u32s();
    set_lanes(&mut w, 2, |_| 5);
    run(&[0xe0fc4000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_atomic_inc_u32 v2, v1, s[4:7], 0 offen glc
    let after = memory.u32s();
    for lane in 0..16 {
        let old = before[lane];
        let expected = if old >= 5 { 0 } else { old + 1 };
        assert_eq!(after[lane], expected, "inc memory {lane}");
        assert_eq!(w.vgpr[2][lane], old, "inc returned {lane}");
    }
}

#[test]
fn sixty_four_bit_atomics() {
    let initial: Vec<u64> = (0..16).map(|i| 0xffff_fff0 + i).collect();
    let bytes: Vec<u8> = initial.iter().flat_map(|v| v.to_le_bytes()).collect();
    let memory = Buffer::from_bytes(&bytes);
    let mut w = wave(raw(&memory, 128));
    w.sgpr[usize::from(EXEC_LO)] = 0xffff;
    set_lanes(&mut w, 1, |lane| lane as u32 * 8);
    set_lanes(&mut w, 2, |_| 0x20);
    set_lanes(&mut w, 3, |lane| lane as u32);
    run(&[0xe10c4000, 0x80410201], &mut w, &[&memory]).unwrap(); // buffer_atomic_add_u64 v[2:3], v1, s[4:7], 0 offen glc
    let after: Vec<u64> = memory
        .read()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for lane in 0..16 {
        let addend = ((lane as u64) << 32) | 0x20;
        assert_eq!(after[lane], initial[lane] + addend, "memory {lane}");
        let returned = u64::from(w.vgpr[2][lane]) | (u64::from(w.vgpr[3][lane]) << 32);
        assert_eq!(returned, initial[lane], "returned {lane}");
    }
}

#[test]
fn format_loads_convert_and_fill_missing_components() {
    // 32_32_32_32_FLOAT from the descriptor: four floats per record.
    let floats: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 3.0).collect();
    let memory = Buffer::from_f32s(&floats);
    let mut w = wave(descriptor(memory.addr(), 16, 16, 63, false, STRUCTURED));
    set_lanes(&mut w, 1, |lane| lane as u32);
    run(&[0xe00c0000, 0x80810401], &mut w, &[&memory]).unwrap(); // buffer_load_format_xyzw v[4:7], v1, s[4:7], 0 idxen
    for lane in 0..32 {
        for k in 0..4 {
            let expected = if lane < 16 { floats[lane * 4 + k] } else { 0.0 };
            assert_eq!(
                f32::from_bits(w.vgpr[4 + k][lane]),
                expected,
                "lane {lane} c{k}"
            );
        }
    }
    // 16_16_UNORM from the instruction.
    let halves: Vec<u16> = (0..64).map(|i| (i as u16).wrapping_mul(1031)).collect();
    let bytes: Vec<u8> = halves.iter().flat_map(|v| v.to_le_bytes()).collect();
    let memory = Buffer::from_bytes(&bytes);
    let mut w = wave(descriptor(memory.addr(), 4, 32, 0, false, STRUCTURED));
    set_lanes(&mut w, 1, |lane| lane as u32);
    run(&[0xe8b88000, 0x80810401], &mut w, &[&memory]).unwrap(); // tbuffer_load_format_xy v[4:5], v1, s[4:7], 0 format:[BUF_FMT_16_16_UNORM] idxen
    for lane in 0..32 {
        for k in 0..2 {
            let expected = f32::from(halves[lane * 2 + k]) / 65535.0;
            assert_eq!(
                f32::from_bits(w.vgpr[4 + k][lane]),
                expected,
                "unorm lane {lane}"
            );
        }
    }
    // 8_8_8_8_SINT read as three components: sign-extended.
    let bytes: Vec<u8> = (0..128u32).map(|i| (i * 29 + 100) as u8).collect();
    let memory = Buffer::from_bytes(&bytes);
    let mut w = wave(descriptor(memory.addr(), 4, 32, 0, false, STRUCTURED));
    set_lanes(&mut w, 1, |lane| lane as u32);
    run(&[0xe9790000, 0x80810401], &mut w, &[&memory]).unwrap(); // tbuffer_load_format_xyz v[4:6], v1, s[4:7], 0 format:[BUF_FMT_8_8_8_8_SINT] idxen
    for lane in 0..32 {
        for k in 0..3 {
            let expected = bytes[lane * 4 + k] as i8 as i32 as u32;
            assert_eq!(w.vgpr[4 + k][lane], expected, "sint lane {lane} c{k}");
        }
    }
    // 32_FLOAT read as xyzw: y and z are 0, w is 1.0.
    let memory = Buffer::from_f32s(&floats);
    let mut w = wave(descriptor(memory.addr(), 4, 32, 22, false, STRUCTURED));
    set_lanes(&mut w, 1, |lane| lane as u32);
    run(&[0xe00c0000, 0x80810401], &mut w, &[&memory]).unwrap(); // buffer_load_format_xyzw v[4:7], v1, s[4:7], 0 idxen
    for (lane, x) in floats[..32].iter().enumerate() {
        let got: Vec<f32> = (4..8).map(|r| f32::from_bits(w.vgpr[r][lane])).collect();
        assert_eq!(got, [*x, 0.0, 0.0, 1.0], "lane {lane}");
    }
}

#[test]
fn d16_format_loads_pack_halves() {
    let halves: Vec<u16> = (0..64).map(|i| 0x3c00 + i as u16).collect();
    let bytes: Vec<u8> = halves.iter().flat_map(|v| v.to_le_bytes()).collect();
    let memory = Buffer::from_bytes(&bytes);
    // 16_16_FLOAT from the descriptor: the halves come back unchanged.
    let mut w = wave(descriptor(memory.addr(), 4, 32, 29, false, STRUCTURED));
    set_lanes(&mut w, 1, |lane| lane as u32);
    run(&[0xe0240000, 0x80810401], &mut w, &[&memory]).unwrap(); // buffer_load_d16_format_xy v4, v1, s[4:7], 0 idxen
    for lane in 0..32 {
        let expected = u32::from(halves[lane * 2]) | (u32::from(halves[lane * 2 + 1]) << 16);
        assert_eq!(w.vgpr[4][lane], expected, "lane {lane}");
    }
}

#[test]
fn format_stores_convert_and_drop_out_of_range_records() {
    let memory = Buffer::from_u32s(&[0x5555_5555; 32]);
    let records = 20;
    let mut w = wave(descriptor(memory.addr(), 4, records, 0, false, STRUCTURED));
    let component = |lane: usize, k: usize| (lane * 4 + k) as f32 / 127.0 - 0.1;
    set_lanes(&mut w, 1, |lane| lane as u32);
    for k in 0..4 {
        set_lanes(&mut w, 4 + k, |lane| component(lane, k).to_bits());
    }
    run(&[0xe9538000, 0x80810401], &mut w, &[&memory]).unwrap(); // tbuffer_store_format_xyzw v[4:7], v1, s[4:7], 0 format:[BUF_FMT_8_8_8_8_UNORM] idxen
    let stored = memory.read();
    for lane in 0..32 {
        for k in 0..4 {
            let expected = if lane < records as usize {
                (component(lane, k).clamp(0.0, 1.0) * 255.0).round() as u8
            } else {
                0x55
            };
            assert_eq!(stored[lane * 4 + k], expected, "lane {lane} c{k}");
        }
    }
    let memory = Buffer::from_u32s(&[0; 32]);
    let mut w = wave(raw(&memory, 128));
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    set_lanes(&mut w, 2, |lane| (lane as f32 * 1.5).to_bits());
    run(&[0xe8b20000, 0x80410201], &mut w, &[&memory]).unwrap(); // tbuffer_store_format_x v2, v1, s[4:7], 0 format:[BUF_FMT_32_FLOAT] offen
    for (lane, value) in memory.f32s().iter().enumerate() {
        assert_eq!(*value, lane as f32 * 1.5, "lane {lane}");
    }
}

#[test]
fn unsupported_descriptor_and_format_features_fault_clearly() {
    let memory = Buffer::from_u32s(&[0; 32]);
    let mut resource = raw(&memory, 128);
    resource[1] |= 1 << 30; // SWIZZLE_ENABLE
    let mut w = wave(resource);
    let fault = run(&LOAD_B32_OFFEN, &mut w, &[&memory]).unwrap_err();
    assert!(
        matches!(&fault, FaultKind::Unsupported(what) if what.contains("swizzle")),
        "{fault}"
    );
    let mut w = wave(raw(&memory, 128));
    let fault = run(&[0xe8f00000, 0x80410001], &mut w, &[&memory]).unwrap_err(); // tbuffer_load_format_x v0, v1, s[4:7], 0 format:[BUF_FMT_10_11_11_FLOAT] offen
    assert!(
        matches!(&fault, FaultKind::Unsupported(what) if what.contains("BUF_FMT_10_11_11_FLOAT")),
        "{fault}"
    );
    let fault = run(&[0xe0c40000, 0x80410001], &mut w, &[&memory]).unwrap_err(); // buffer_load_lds_b32 v1, s[4:7], 0 offen
    assert_eq!(
        fault,
        FaultKind::Unimplemented {
            mnemonic: "buffer_load_lds_b32".into()
        }
    );
}
