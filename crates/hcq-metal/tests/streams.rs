//! Streams (more command queues of one Metal device) and events, against the recording fake,
//! whose command buffers run as a GPU orders them: in commit order per queue, and after the
//! event values they wait for.

use hcq_core::{CompileCache, Error};
use hcq_metal::fake::{Call, FakeMetal, FakeQueue};
use hcq_metal::{MetalBuffer, MetalDevice, StreamQueue};
use std::sync::{Arc, Weak};
use std::time::Duration;

fn open() -> MetalDevice<FakeMetal> {
    MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::disabled()).unwrap()
}

fn filled(dev: &MetalDevice<FakeMetal>, bytes: &[u8]) -> MetalBuffer<FakeMetal> {
    let b = dev.alloc(bytes.len()).unwrap();
    dev.copy_in(&b, 0, bytes).unwrap();
    b
}

fn contents(dev: &MetalDevice<FakeMetal>, b: &MetalBuffer<FakeMetal>) -> Vec<u8> {
    let mut out = vec![0u8; b.size()];
    dev.copy_out(&mut out, b, 0).unwrap();
    out
}

/// A copy on stream `a`, then one on stream `b` of what the first wrote: with an event between
/// them the second sees the first's bytes; without, `b` runs ahead and copies zeros.
#[test]
fn an_event_orders_work_of_two_streams() {
    let want: Vec<u8> = (0..64u32).map(|i| (i * 7 + 3) as u8).collect();
    for ordered in [true, false] {
        let dev = open();
        let (a, b) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
        assert_eq!(a.name, "metal:0 stream 1");
        assert_eq!(b.name, "metal:0 stream 2");
        let x = filled(&dev, &want);
        let (y, z) = (dev.alloc(64).unwrap(), dev.alloc(64).unwrap());
        // Streams take the device's buffers.
        a.copy(&y, 0, &x, 0, 64).unwrap();
        let e = a.record_event().unwrap();
        if ordered {
            b.wait_event(&e).unwrap();
        }
        b.copy(&z, 0, &y, 0, 64).unwrap();
        assert!(!a.event_is_complete(&e));
        b.synchronize().unwrap();
        if ordered {
            // Waiting for `b` ran `a`'s copy and marker first, as the GPU would have.
            assert!(a.event_is_complete(&e));
            assert_eq!(contents(&dev, &z), want);
        } else {
            assert_eq!(contents(&dev, &z), vec![0u8; 64]);
            assert!(!a.event_is_complete(&e));
        }
        a.synchronize_event(&e).unwrap();
        assert_eq!(contents(&dev, &y), want);
        assert_eq!(a.in_flight(), 0);
    }
}

/// What an event is in Metal calls: a signal of the queue's shared event at increasing values
/// in a command buffer of its own; a wait is an `encodeWaitForEvent` on the other queue.
#[test]
fn events_are_shared_event_values() {
    let dev = open();
    let s = dev.new_stream().unwrap();
    let api = dev.api();
    api.clear_calls();
    let e1 = s.record_event().unwrap();
    let e2 = s.record_event().unwrap();
    assert_eq!((e1.value(), e2.value()), (1, 2));
    dev.wait_event(&e2).unwrap();
    let calls = api.take_calls();
    let (event, cb1, cb2, cb3) = match calls[..] {
        [Call::NewSharedEvent(event), Call::CommandBuffer { queue: q1, cb: cb1 }, Call::EncodeSignalEvent { .. }, Call::Commit(_), Call::CommandBuffer { queue: q2, cb: cb2 }, Call::EncodeSignalEvent { .. }, Call::Commit(_), Call::CommandBuffer { queue: q3, cb: cb3 }, Call::EncodeWaitForEvent { .. }, Call::Commit(_)] =>
        {
            // The device's queue is the first one made, the stream's the second.
            assert_eq!((q1, q2, q3), (FakeQueue(2), FakeQueue(2), FakeQueue(1)));
            (event, cb1, cb2, cb3)
        }
        ref other => panic!("unexpected calls {other:?}"),
    };
    assert_eq!(
        calls,
        vec![
            Call::NewSharedEvent(event),
            Call::CommandBuffer {
                queue: FakeQueue(2),
                cb: cb1
            },
            Call::EncodeSignalEvent {
                cb: cb1,
                event,
                value: 1
            },
            Call::Commit(cb1),
            Call::CommandBuffer {
                queue: FakeQueue(2),
                cb: cb2
            },
            Call::EncodeSignalEvent {
                cb: cb2,
                event,
                value: 2
            },
            Call::Commit(cb2),
            Call::CommandBuffer {
                queue: FakeQueue(1),
                cb: cb3
            },
            Call::EncodeWaitForEvent {
                cb: cb3,
                event,
                value: 2
            },
            Call::Commit(cb3),
        ]
    );
    // Waiting on the queue that recorded an event needs nothing: it is in order already.
    s.wait_event(&e1).unwrap();
    assert!(api.take_calls().is_empty());
    dev.synchronize().unwrap();
    assert_eq!(api.event_value(event), 2);
    assert!(s.event_is_complete(&e1) && s.event_is_complete(&e2));
}

#[test]
fn events_are_checked_against_their_device_and_queue() {
    let dev = open();
    let s = dev.new_stream().unwrap();
    let e = s.record_event().unwrap();
    // GPU times of two devices are not compared.
    let other = open();
    let theirs = other.record_event().unwrap();
    other.synchronize_event(&theirs).unwrap();
    s.synchronize_event(&e).unwrap();
    assert!(matches!(
        dev.elapsed_between(&theirs, &e),
        Err(Error::InvalidArgument(_))
    ));
    // Only the queue that recorded it waits for it from the host.
    match dev.synchronize_event(&e) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("metal:0 stream 1"), "{m}"),
        other => panic!("{other:?}"),
    }
    s.synchronize_event(&e).unwrap();
}

/// An event of one device orders another device's queue: its command buffers wait for the
/// shared event's value, so they run only after the first device's work before the event.
#[test]
fn an_event_orders_work_of_two_devices() {
    for ordered in [true, false] {
        let api = FakeMetal::new().with_devices(2);
        let first = MetalDevice::open_with_cache(api.clone(), 0, CompileCache::disabled()).unwrap();
        let second = MetalDevice::open_with_cache(api, 1, CompileCache::disabled()).unwrap();
        let x = filled(&first, &[7u8; 64]);
        let y = first.alloc(64).unwrap();
        first.copy(&y, 0, &x, 0, 64).unwrap();
        let done = first.record_event().unwrap();
        if ordered {
            second.wait_event(&done).unwrap();
        }
        let after = second.record_event().unwrap();
        assert!(!first.event_is_complete(&done));
        second.synchronize_event(&after).unwrap();
        // The second device's work ran after the first's copy only when it waited for it.
        assert_eq!(first.event_is_complete(&done), ordered);
        first.synchronize().unwrap();
        assert_eq!(contents(&first, &y), vec![7u8; 64]);
    }
}

/// The time between two events is the GPU time between the ends of their command buffers;
/// an event not reached yet, or events in the wrong order, are errors.
#[test]
fn elapsed_time_between_events() {
    let dev = open();
    let s = dev.new_stream().unwrap();
    let e1 = dev.record_event().unwrap();
    let x = dev.alloc(16).unwrap();
    let y = dev.alloc(16).unwrap();
    s.copy(&y, 0, &x, 0, 16).unwrap();
    let e2 = s.record_event().unwrap();
    assert!(matches!(
        dev.elapsed_between(&e1, &e2),
        Err(Error::InvalidArgument(_))
    ));
    dev.synchronize_event(&e1).unwrap();
    s.synchronize_event(&e2).unwrap();
    // The fake's GPU clock: command buffer N starts at N seconds. e1's marker is command
    // buffer 0, the copy 1, e2's marker 2.
    assert_eq!(
        dev.elapsed_between(&e1, &e2).unwrap(),
        Duration::from_secs(2)
    );
    assert!(matches!(
        dev.elapsed_between(&e2, &e1),
        Err(Error::InvalidArgument(_))
    ));
    let other = open();
    assert!(matches!(
        other.elapsed_between(&e1, &e2),
        Err(Error::InvalidArgument(_))
    ));
}

/// `synchronize_streams` waits for the device's queue and every live tracked stream; a
/// dropped stream has waited for its own work and is forgotten.
#[test]
fn synchronize_streams_waits_for_every_live_stream() {
    let dev = open();
    let s1 = Arc::new(dev.new_stream().unwrap());
    let s2 = Arc::new(dev.new_stream().unwrap());
    for s in [&s1, &s2] {
        dev.track_stream(Arc::downgrade(s) as Weak<dyn StreamQueue>);
    }
    let x = dev.alloc(16).unwrap();
    let y = dev.alloc(16).unwrap();
    for s in [&s1, &s2] {
        s.copy(&y, 0, &x, 0, 16).unwrap();
    }
    dev.copy(&x, 0, &y, 0, 16).unwrap();
    assert_eq!((dev.in_flight(), s1.in_flight(), s2.in_flight()), (1, 1, 1));
    drop(s2);
    s1.copy(&y, 0, &x, 0, 16).unwrap();
    dev.synchronize_streams().unwrap();
    assert_eq!((dev.in_flight(), s1.in_flight()), (0, 0));
}

/// A failed command buffer of a stream is that stream's error, not the device's.
#[test]
fn a_stream_reports_its_own_failures() {
    let dev = open();
    let s = dev.new_stream().unwrap();
    let x = dev.alloc(16).unwrap();
    let y = dev.alloc(16).unwrap();
    dev.api().fail_next_commit("page fault at 0x1000");
    s.copy(&y, 0, &x, 0, 16).unwrap();
    dev.copy(&y, 0, &x, 0, 16).unwrap();
    dev.synchronize().unwrap();
    match s.synchronize() {
        Err(Error::DeviceFault {
            device,
            message,
            kind,
            ..
        }) => {
            assert_eq!(device, "metal:0 stream 1");
            assert!(message.contains("page fault"), "{message}");
            assert_eq!(kind, hcq_core::FaultKind::MemoryFault);
        }
        other => panic!("{other:?}"),
    }
}

/// The fake's own model: a command buffer waiting for a value nothing committed sets fails
/// when waited for (a real GPU would hang) instead of blocking the test.
#[test]
fn the_fake_fails_a_wait_that_could_never_end() {
    use hcq_metal::{CommandStatus, MetalApi};
    let api = FakeMetal::new();
    let device = api.copy_all_devices().remove(0);
    let queue = api.new_command_queue(&device, 4).unwrap();
    let event = api.new_shared_event(&device).unwrap();
    let cb = api.command_buffer(&queue).unwrap();
    api.encode_wait_for_event(&cb, &event, 5);
    api.commit(&cb);
    api.complete_all();
    assert_eq!(api.status_of(cb), CommandStatus::Committed);
    api.wait_until_completed(&cb);
    assert_eq!(api.status_of(cb), CommandStatus::Error);
    assert!(api.error(&cb).unwrap().contains("would hang"));
}
