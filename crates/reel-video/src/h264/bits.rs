//! Bit-level access to H.264 RBSPs: emulation prevention removed and restored, Exp-Golomb
//! codes read and written.

/// The RBSP of a NAL unit's payload: every emulation prevention byte (the `03` of
/// `00 00 03`) removed.
pub(crate) fn unescape(payload: &[u8]) -> Vec<u8> {
    let mut rbsp = Vec::with_capacity(payload.len());
    let mut zeros = 0;
    for &b in payload {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        rbsp.push(b);
    }
    rbsp
}

/// A NAL unit payload for `rbsp`: `03` inserted wherever two zero bytes would otherwise be
/// followed by a byte ≤ 3 (a start code or its look-alikes), and after a final zero pair.
pub(crate) fn escape(rbsp: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(rbsp.len() + rbsp.len() / 64);
    let mut zeros = 0;
    for &b in rbsp {
        if zeros >= 2 && b <= 3 {
            payload.push(3);
            zeros = 0;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        payload.push(b);
    }
    if zeros >= 2 {
        payload.push(3);
    }
    payload
}

/// Reads bits, most significant first.
#[derive(Clone)]
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }

    pub(crate) fn bit(&mut self) -> Option<u32> {
        let byte = self.data.get(self.at / 8)?;
        let bit = (byte >> (7 - self.at % 8)) & 1;
        self.at += 1;
        Some(u32::from(bit))
    }

    /// `n` ≤ 32 bits as an unsigned number.
    pub(crate) fn bits(&mut self, n: u32) -> Option<u32> {
        let mut value = 0u64;
        for _ in 0..n {
            value = (value << 1) | u64::from(self.bit()?);
        }
        u32::try_from(value).ok()
    }

    /// An unsigned Exp-Golomb code.
    pub(crate) fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        let value = u64::from(self.bits(zeros)?);
        u32::try_from((1u64 << zeros) - 1 + value).ok()
    }

    /// The bits from here up to the RBSP stop bit (the last `1` of the data), which is not
    /// included; `None` when there is no stop bit after this point.
    pub(crate) fn rest_before_stop_bit(&self) -> Option<(usize, usize)> {
        let last = self.data.iter().rposition(|&b| b != 0)?;
        let stop = last * 8 + 7 - self.data[last].trailing_zeros() as usize;
        (stop >= self.at).then_some((self.at, stop))
    }

    pub(crate) fn data(&self) -> &'a [u8] {
        self.data
    }
}

/// Writes bits, most significant first.
#[derive(Default)]
pub(crate) struct BitWriter {
    out: Vec<u8>,
    /// Bits written into the last byte of `out` (0: the next bit starts a new byte).
    used: u32,
}

impl BitWriter {
    pub(crate) fn bit(&mut self, bit: u32) {
        if self.used == 0 {
            self.out.push(0);
        }
        if bit != 0
            && let Some(last) = self.out.last_mut()
        {
            *last |= 0x80 >> self.used;
        }
        self.used = (self.used + 1) % 8;
    }

    /// The low `n` bits of `value`.
    pub(crate) fn bits(&mut self, value: u32, n: u32) {
        for i in (0..n).rev() {
            self.bit((value >> i) & 1);
        }
    }

    /// An unsigned Exp-Golomb code.
    pub(crate) fn ue(&mut self, value: u32) {
        let coded = u64::from(value) + 1;
        let length = 63 - coded.leading_zeros();
        self.bits(0, length);
        for i in (0..=length).rev() {
            self.bit(((coded >> i) & 1) as u32);
        }
    }

    /// Copies bits `range` (bit offsets) of `data`.
    pub(crate) fn copy(&mut self, data: &[u8], (start, end): (usize, usize)) {
        let mut at = start;
        // Bit by bit until this writer is byte-aligned, then whole bytes while they last.
        while at < end && self.used != 0 {
            self.bit(u32::from((data[at / 8] >> (7 - at % 8)) & 1));
            at += 1;
        }
        if at % 8 == 0 {
            let whole = (end - at) / 8;
            self.out.extend_from_slice(&data[at / 8..at / 8 + whole]);
            at += whole * 8;
        } else {
            let shift = at % 8;
            while end - at >= 8 {
                let i = at / 8;
                self.out
                    .push((data[i] << shift) | (data[i + 1] >> (8 - shift)));
                at += 8;
            }
        }
        while at < end {
            self.bit(u32::from((data[at / 8] >> (7 - at % 8)) & 1));
            at += 1;
        }
    }

    /// The RBSP: the stop bit and zero bits to the byte boundary appended.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.bit(1);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_and_hides_start_codes() {
        let rbsp = [0, 0, 1, 7, 0, 0, 0, 0, 3, 9, 0, 0];
        let payload = escape(&rbsp);
        assert_eq!(payload, [0, 0, 3, 1, 7, 0, 0, 3, 0, 0, 3, 3, 9, 0, 0, 3]);
        assert!(
            !payload
                .windows(3)
                .any(|w| w[0] == 0 && w[1] == 0 && w[2] <= 2)
        );
        assert_eq!(unescape(&payload), rbsp);
    }

    #[test]
    fn exp_golomb_and_copies_round_trip_at_every_alignment() {
        let mut w = BitWriter::default();
        for v in [0, 1, 2, 3, 7, 8, 254, 255, 65_535, 1 << 20] {
            w.ue(v);
        }
        w.bits(0b101, 3);
        let data = w.finish();
        let mut r = BitReader::new(&data);
        for v in [0, 1, 2, 3, 7, 8, 254, 255, 65_535, 1 << 20] {
            assert_eq!(r.ue(), Some(v));
        }
        assert_eq!(r.bits(3), Some(0b101));
        assert_eq!(r.rest_before_stop_bit(), Some((r.at, r.at)));

        let source: Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        for lead in 0..9 {
            for start in 0..12 {
                let end = source.len() * 8 - 5;
                let mut w = BitWriter::default();
                w.bits(0, lead);
                w.copy(&source, (start, end));
                let out = w.finish();
                let mut r = BitReader::new(&out);
                r.bits(lead).expect("the leading bits were written");
                let mut s = BitReader::new(&source);
                s.bits(start as u32).expect("the source holds them");
                for _ in start..end {
                    assert_eq!(r.bit(), s.bit(), "lead {lead} start {start}");
                }
                assert_eq!(r.bit(), Some(1), "stop bit");
            }
        }
    }
}
