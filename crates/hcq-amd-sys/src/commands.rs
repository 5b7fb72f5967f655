//! What the two command engines have in common: the compute queue's PM4 ([`Pm4Builder`]) and
//! the copy queue's SDMA ([`SdmaBuilder`]) both wait for a signal, stamp the GPU clock, signal
//! (release) a value, copy and fill. [`CommandBuilder`] names those operations, so that a
//! sequence the driver emits on either engine (a copy between its waits and its signal, say)
//! is written once. Each operation is the builder's own method: the words are the ones that
//! builder emits, whichever way it is called.

use crate::pm4::Pm4Builder;
use crate::sdma::SdmaBuilder;

/// A command stream being built for one engine.
pub trait CommandBuilder {
    /// Drops every word, keeping the allocation for the next stream.
    fn clear(&mut self);

    /// Waits until the 32-bit word at `signal_value_addr` is `>= value` (low 32 bits
    /// compared).
    fn wait(&mut self, signal_value_addr: u64, value: u64);

    /// Writes the 64-bit GPU clock to `addr` once the commands before it have finished.
    fn timestamp(&mut self, addr: u64);

    /// Writes the low 32 bits of `value` to the signal at `signal_value_addr` once the
    /// commands before it have finished; with an event mailbox (`event_mailbox_ptr` ≠ 0), also
    /// writes `event_id` there and raises the interrupt that wakes whoever waits on the event.
    fn signal(&mut self, signal_value_addr: u64, value: u64, event_mailbox_ptr: u64, event_id: u32);

    /// Copies `size` bytes from `src` to `dst`; a signal after it follows the data.
    fn copy(&mut self, dst: u64, src: u64, size: u64);

    /// Fills `size` bytes at `dst` with the 32-bit `value` repeated (whole dwords).
    fn fill(&mut self, dst: u64, value: u32, size: u64);

    /// `body`, between stamps of the GPU clock at `stamps` (start and end addresses) when
    /// given.
    fn stamped<R>(&mut self, stamps: Option<(u64, u64)>, body: impl FnOnce(&mut Self) -> R) -> R
    where
        Self: Sized,
    {
        if let Some((start, _)) = stamps {
            self.timestamp(start);
        }
        let result = body(self);
        if let Some((_, end)) = stamps {
            self.timestamp(end);
        }
        result
    }
}

/// Both builders already have each operation as an inherent method of the same signature;
/// the trait forwards to them, so the packets are the builders' own.
macro_rules! forward_to_inherent_methods {
    ($($builder:ty),*) => {$(
        impl CommandBuilder for $builder {
            fn clear(&mut self) {
                <$builder>::clear(self);
            }
            fn wait(&mut self, signal_value_addr: u64, value: u64) {
                <$builder>::wait(self, signal_value_addr, value);
            }
            fn timestamp(&mut self, addr: u64) {
                <$builder>::timestamp(self, addr);
            }
            fn signal(
                &mut self,
                signal_value_addr: u64,
                value: u64,
                event_mailbox_ptr: u64,
                event_id: u32,
            ) {
                <$builder>::signal(self, signal_value_addr, value, event_mailbox_ptr, event_id);
            }
            fn copy(&mut self, dst: u64, src: u64, size: u64) {
                <$builder>::copy(self, dst, src, size);
            }
            fn fill(&mut self, dst: u64, value: u32, size: u64) {
                <$builder>::fill(self, dst, value, size);
            }
        }
    )*};
}

forward_to_inherent_methods!(Pm4Builder, SdmaBuilder);

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequence a transfer emits, through the trait.
    fn transfer(b: &mut impl CommandBuilder) {
        b.clear();
        b.wait(0x1000, 7);
        b.stamped(Some((0x2000, 0x2008)), |b| b.copy(0x3000, 0x4000, 256));
        b.signal(0x1000, 8, 0x5000, 3);
    }

    #[test]
    fn the_trait_emits_each_builders_own_words() {
        let mut pm4 = Pm4Builder::new();
        transfer(&mut pm4);
        let mut direct = Pm4Builder::new();
        direct.wait(0x1000, 7);
        direct.timestamp(0x2000);
        direct.copy(0x3000, 0x4000, 256);
        direct.timestamp(0x2008);
        direct.signal(0x1000, 8, 0x5000, 3);
        assert_eq!(pm4.words, direct.words);

        let mut sdma = SdmaBuilder::new();
        transfer(&mut sdma);
        let mut direct = SdmaBuilder::new();
        direct.wait(0x1000, 7);
        direct.timestamp(0x2000);
        direct.copy(0x3000, 0x4000, 256);
        direct.timestamp(0x2008);
        direct.signal(0x1000, 8, 0x5000, 3);
        assert_eq!(sdma.words, direct.words);
        assert_eq!(
            sdma.packets().count(),
            direct.packets().count(),
            "packet boundaries are kept"
        );
    }
}
