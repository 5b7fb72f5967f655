use super::*;
use crate::regs;

fn decode_one(words: &[u32]) -> Packet<'_> {
    let h = Header::parse(words[0]);
    assert_eq!(h.len(), words.len());
    Packet::decode(h, &words[1..]).expect("decodes")
}

#[test]
fn indirect_buffer_round_trips() {
    for (address, size_dwords, chain) in [
        (0x1234_5678_9abc_u64, 17u32, false),
        (0xffff_ffff_fffc, IB_MAX_DWORDS, true),
        (0x1000, 0, false),
    ] {
        let ib = IndirectBuffer {
            address,
            size_dwords,
            chain,
            valid: true,
        };
        let mut w = Vec::new();
        ib.encode(&mut w);
        assert_eq!(w.len(), IndirectBuffer::DWORDS);
        assert_eq!(w[0], 0xc002_3f00);
        assert_eq!(decode_one(&w), Packet::IndirectBuffer(ib));
    }
}

#[test]
fn dma_data_copies_match_the_documented_layout() {
    // PACKET3(DMA_DATA, 5); control: DST_SEL 3 (L2) at bit 20, SRC_SEL 3 (L2) at bit 29,
    // CP_SYNC at bit 31; source and destination lo/hi; BYTE_COUNT in the command dword.
    let mut b = Pm4Builder::new();
    b.copy(0x7f00_0000_1000, 0x7e00_0000_2000, 0x1234);
    assert_eq!(
        b.words,
        [
            0xc005_5000,
            0xe030_0000,
            0x0000_2000,
            0x7e00,
            0x0000_1000,
            0x7f00,
            0x1234
        ]
    );
}

#[test]
fn large_copies_split_into_chunks_and_only_the_last_syncs() {
    let size = 2 * DMA_DATA_CHUNK_BYTES + 12;
    let mut b = Pm4Builder::new();
    b.copy(0x10_0000_0000, 0x20_0000_0000, size);
    let packets: Vec<DmaData> = b
        .words
        .chunks(7)
        .map(|w| match decode_one(w) {
            Packet::DmaData(d) => d,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(packets.len(), 3);
    let mut at = 0;
    for (i, d) in packets.iter().enumerate() {
        assert_eq!(d.src, 0x20_0000_0000 + at);
        assert_eq!(d.dst, 0x10_0000_0000 + at);
        assert_eq!(d.cp_sync, i == 2);
        at += u64::from(d.byte_count);
    }
    assert_eq!(at, size);
    // An empty copy is one packet moving nothing that still waits for earlier DMAs.
    let mut b = Pm4Builder::new();
    b.copy(0x1000, 0x2000, 0);
    assert_eq!(
        decode_one(&b.words),
        Packet::DmaData(DmaData::copy(0x1000, 0x2000, 0, true))
    );
}

#[test]
fn dma_data_round_trips_every_field() {
    let d = DmaData {
        engine_pfp: true,
        src_cache_policy: 2,
        src_volatile: true,
        dst_sel: dma_dst_sel::GDS,
        dst_cache_policy: 1,
        dst_volatile: true,
        src_sel: dma_src_sel::DATA,
        cp_sync: false,
        src: 0xdead_beef,
        dst: 0xffff_1234_5678_9abc,
        byte_count: DMA_DATA_MAX_BYTES,
        src_is_register: true,
        dst_is_register: false,
        src_no_increment: false,
        dst_no_increment: true,
        raw_wait: true,
        disable_write_confirm: true,
    };
    let mut w = Vec::new();
    d.encode(&mut w);
    assert_eq!(decode_one(&w), Packet::DmaData(d));
    assert!(matches!(
        Packet::decode(Header::parse(w[0]), &w[1..6]),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn builder_indirect_buffers_match_the_reference_layout() {
    // tinygrad: PACKET3(INDIRECT_BUFFER, 2), lo, hi, len | INDIRECT_BUFFER_VALID.
    let mut b = Pm4Builder::new();
    b.indirect_buffer(0x7f00_1234_5600, 99);
    assert_eq!(b.words, [0xc002_3f00, 0x1234_5600, 0x7f00, 99 | (1 << 23)]);
    b.clear();
    b.chain_indirect_buffer(0x40_0000, 8);
    assert_eq!(b.words[3], 8 | (1 << 20) | (1 << 23));
    assert!(IndirectBuffer::decode(&[0, 0]).is_err());
}

#[test]
fn patch_handles_point_at_the_fields_they_change() {
    let mut b = Pm4Builder::new();
    let wait = b.wait(0x1000, 5);
    let setup = DispatchSetup {
        code_entry: 0x10000,
        rsrc1: 0,
        rsrc2: 0,
        group_segment_size: 0,
        scratch_base: 0,
        tmpring_size: 0,
        user_data: [0; 16],
        user_data_count: 2,
    };
    let dispatch = b.exec(&setup, [1, 2, 3], [4, 5, 6]);
    let signal = b.signal(0x2000, 7, 0, 0);
    let mut words = b.words.clone();
    wait.set_value(&mut words, 0x1_0000_0009);
    dispatch.set_dims(&mut words, [10, 11, 12], [13, 14, 15]);
    signal.set_value(&mut words, 0x2_0000_0021);
    let mut pos = 0;
    let (mut saw_wait, mut saw_dispatch, mut saw_signal) = (false, false, false);
    while pos < words.len() {
        let h = Header::parse(words[pos]);
        match Packet::decode(h, &words[pos + 1..pos + h.len()]).unwrap() {
            Packet::WaitRegMem(w) if w.mem_space == 1 => {
                assert_eq!(w.reference, 9);
                saw_wait = true;
            }
            Packet::DispatchDirect(d) => {
                assert_eq!(d.dims, [10, 11, 12]);
                saw_dispatch = true;
            }
            Packet::SetShReg(s) if s.reg == regs::COMPUTE_START_X => {
                assert_eq!(&s.values[3..6], &[13, 14, 15]);
            }
            Packet::ReleaseMem(r) => {
                assert_eq!(r.data, 0x2_0000_0021);
                saw_signal = true;
            }
            _ => {}
        }
        pos += h.len();
    }
    assert!(saw_wait && saw_dispatch && saw_signal);
}

#[test]
fn copy_data_fields_sit_where_the_mec_layout_puts_them() {
    // tinygrad's PMC read: COPY_DATA, src_sel 4 (perf counter), dst_sel 2 (memory), with
    // write confirm (bit 20) in its SQTT form; count_sel is bit 16.
    let words = [
        header(OP_COPY_DATA, 4),
        (1 << 20) | (2 << 8) | 4,
        0x1234,
        0,
        0xdead_bee0,
        0x7f,
    ];
    let Packet::CopyData(c) = decode_one(&words) else {
        panic!("not COPY_DATA");
    };
    assert_eq!((c.src_sel, c.dst_sel), (4, 2));
    assert!(c.write_confirm && !c.count_64);
    assert_eq!((c.src, c.dst), (0x1234, 0x7f_dead_bee0));
    let mut again = Vec::new();
    c.encode(&mut again);
    assert_eq!(again, words);
    let c64 = CopyData::decode(&[(1 << 16) | (5 << 8) | 9, 0, 0, 0, 0]).expect("decodes");
    assert!(c64.count_64);
    assert_eq!((c64.src_sel, c64.dst_sel), (9, 5));
}

#[test]
fn write_data_pred_exec_and_set_uconfig_reg_decode() {
    let words = [
        header(OP_WRITE_DATA, 4),
        (5 << 8) | (1 << 16),
        0x1000,
        0x2,
        7,
        8,
    ];
    let Packet::WriteData(d) = decode_one(&words) else {
        panic!("not WRITE_DATA");
    };
    assert_eq!(d.dst_sel, write_dst_sel::MEMORY);
    assert!(d.no_increment);
    assert_eq!((d.dst, d.data), (0x2_0000_1000, &[7u32, 8][..]));
    let mut again = Vec::new();
    d.encode(&mut again);
    assert_eq!(again, words);
    assert!(WriteData::decode(&[0, 0, 0]).is_err(), "no data dword");

    // tinygrad: PRED_EXEC with xcc_mask << 24, then the count or-ed in.
    let p = PredExec::decode(&[(0b10 << 24) | 17]).expect("decodes");
    assert_eq!((p.exec_count, p.device_select), (17, 0b10));

    let words = [header(OP_SET_UCONFIG_REG, 2), 0x200, 0xe000_0000, 5];
    let Packet::SetUconfigReg(u) = decode_one(&words) else {
        panic!("not SET_UCONFIG_REG");
    };
    assert_eq!((u.reg, u.values), (0x200, &[0xe000_0000u32, 5][..]));
}

#[test]
fn every_opcode_the_definitions_list_has_a_name() {
    for (op, name) in [
        (0x10, "NOP"),
        (0x23, "PRED_EXEC"),
        (0x37, "WRITE_DATA"),
        (0x40, "COPY_DATA"),
        (0x50, "DMA_DATA"),
        (0x79, "SET_UCONFIG_REG"),
        (0x93, "WAIT_REG_MEM64"),
        (0xf0, "SET_Q_PREEMPTION_MODE"),
    ] {
        assert_eq!(opcode_name(op), Some(name));
    }
    assert_eq!(opcode_name(0x01), None);
}

#[test]
fn every_gli_inv_value_but_zero_touches_the_instruction_cache() {
    // GCR_CNTL's GLI_INV field is bits 0..2: 1 (all), 2 and 3 (a range) all invalidate.
    assert!(!gcr::invalidates_instructions(0x4380));
    for gli in 1..=3 {
        assert!(gcr::invalidates_instructions(0x4380 | gli));
    }
    assert!(
        !gcr::invalidates_instructions(1 << 2),
        "GL1_RANGE is not GLI_INV"
    );
}

#[test]
fn a_dispatch_says_where_its_scratch_registers_are() {
    let setup = DispatchSetup {
        code_entry: 0x1_0000_0100,
        rsrc1: 0,
        rsrc2: 0,
        group_segment_size: 0,
        scratch_base: 0x12_3456_7800,
        tmpring_size: 0x0020_0400,
        user_data: [0; 16],
        user_data_count: 0,
    };
    let mut b = Pm4Builder::new();
    let patch = b.exec(&setup, [1, 1, 1], [64, 1, 1]);
    let at = patch.scratch_base_at();
    assert_eq!(
        b.words[at..at + 2],
        [
            (setup.scratch_base >> 8) as u32,
            (setup.scratch_base >> 40) as u32
        ]
    );
    // The `SET_SH_REG` packets name the registers the words go to.
    let header = at - 2 - 4;
    assert_eq!(b.words[header + 1], u32::from(regs::COMPUTE_PGM_LO));
    assert_eq!(
        u32::from(regs::COMPUTE_PGM_LO) + 4,
        u32::from(regs::COMPUTE_DISPATCH_SCRATCH_BASE_LO)
    );
    assert_eq!(b.words[patch.tmpring_size_at()], setup.tmpring_size);
    assert_eq!(
        b.words[patch.tmpring_size_at() - 1],
        u32::from(regs::COMPUTE_TMPRING_SIZE)
    );
}
