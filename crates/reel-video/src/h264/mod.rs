//! What an H.264 access unit holds, read from its bytes without decoding: the NAL unit
//! types (keyframe, parameter sets) and the slice types (B-frames), so a recorded stream
//! can be checked against the canonical rules before it is kept as recorded.

mod bits;
mod rewrite;

pub(crate) use rewrite::{ParameterSets, Rewrite, rewrite_access_unit};

/// NAL unit types Reel looks at.
pub mod nal {
    /// A slice of a non-IDR picture.
    pub const SLICE: u8 = 1;
    /// A slice of an IDR picture, where decoding can start.
    pub const IDR: u8 = 5;
    /// Sequence parameter set.
    pub const SPS: u8 = 7;
    /// Picture parameter set.
    pub const PPS: u8 = 8;
}

/// The NAL units of an Annex B access unit: each unit's bytes after its start code (NAL
/// header first), in order. Bytes before the first start code are not a unit. Lazy: a
/// caller that stops at the first slice never scans the slice data (start codes are
/// found with memchr's SIMD search, not byte by byte).
pub fn nal_units(access_unit: &[u8]) -> impl Iterator<Item = &[u8]> {
    let finder = memchr::memmem::Finder::new(&[0u8, 0, 1]);
    let mut next_start = finder.find(access_unit).map(|i| i + 3);
    std::iter::from_fn(move || {
        let start = next_start?;
        let rest = &access_unit[start..];
        let end = match finder.find(rest) {
            Some(i) => {
                next_start = Some(start + i + 3);
                // A 4-byte start code's leading zero belongs to no unit.
                let mut end = start + i;
                while end > start && access_unit[end - 1] == 0 {
                    end -= 1;
                }
                end
            }
            None => {
                next_start = None;
                access_unit.len()
            }
        };
        Some(&access_unit[start..end])
    })
}

/// The NAL header byte of the first slice (IDR or not) of an access unit. Every slice of a
/// picture has the same NAL type (IDR or not) and the same `nal_ref_idc` (H.264 7.4.1), so
/// the first one tells both, and nothing after it is read.
fn first_slice_header(access_unit: &[u8]) -> Option<u8> {
    nal_units(access_unit)
        .filter_map(|u| u.first().copied())
        .find(|h| matches!(*h & 0x1f, nal::SLICE | nal::IDR))
}

/// Whether an access unit holds an IDR picture, where decoding can start; reads NAL
/// headers up to the first slice.
pub fn is_idr(access_unit: &[u8]) -> bool {
    first_slice_header(access_unit).is_some_and(|h| h & 0x1f == nal::IDR)
}

/// What one access unit holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessUnitInfo {
    /// It starts with an Annex B start code.
    pub annex_b: bool,
    /// It holds an IDR slice.
    pub idr: bool,
    /// It holds a sequence parameter set.
    pub sps: bool,
    /// It holds a picture parameter set.
    pub pps: bool,
    /// Slices (IDR or not) it holds.
    pub slices: usize,
    /// It holds a B slice (decode order differs from presentation order).
    pub b_slice: bool,
    /// A slice of it is a reference picture (`nal_ref_idc` ≠ 0): later frames may predict
    /// from it. A decoder may skip a unit that is not, when it does not need its picture.
    pub reference: bool,
}

/// Whether an access unit holds a reference picture; reads NAL headers up to the first
/// slice (see [`AccessUnitInfo::reference`]). A unit without slices counts as a reference:
/// nothing is known to make it safe to skip.
pub fn is_reference(access_unit: &[u8]) -> bool {
    first_slice_header(access_unit).is_none_or(|h| h & 0x60 != 0)
}

/// Reads the NAL and slice types of an access unit.
pub fn inspect(access_unit: &[u8]) -> AccessUnitInfo {
    let mut info = AccessUnitInfo {
        annex_b: access_unit.starts_with(&[0, 0, 1]) || access_unit.starts_with(&[0, 0, 0, 1]),
        ..AccessUnitInfo::default()
    };
    for unit in nal_units(access_unit) {
        let Some(&header) = unit.first() else {
            continue;
        };
        match header & 0x1f {
            nal::SPS => info.sps = true,
            nal::PPS => info.pps = true,
            kind @ (nal::SLICE | nal::IDR) => {
                info.slices += 1;
                info.idr |= kind == nal::IDR;
                info.reference |= header & 0x60 != 0;
                // slice_type, the second field of the slice header: 1 and 6 are B.
                if slice_type(&unit[1..]).is_some_and(|t| t % 5 == 1) {
                    info.b_slice = true;
                }
            }
            _ => {}
        }
    }
    info
}

/// The `slice_type` of a slice header (after `first_mb_in_slice`), if the bytes hold it.
fn slice_type(header: &[u8]) -> Option<u32> {
    // The two fields lie in the first bytes.
    let rbsp = bits::unescape(&header[..header.len().min(24)]);
    let mut bits = bits::BitReader::new(&rbsp);
    bits.ue()?; // first_mb_in_slice
    bits.ue()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_units_and_slice_types() {
        // SPS, PPS, then an IDR slice: first_mb 0 ("1"), slice_type 7 (I, "0001000").
        let idr = [
            0,
            0,
            0,
            1,
            0x67,
            0x42,
            0,
            0,
            1,
            0x68,
            0xce,
            0,
            0,
            1,
            0x65,
            0b1000_1000,
            0,
        ];
        let info = inspect(&idr);
        assert!(info.annex_b && info.idr && info.sps && info.pps && !info.b_slice);
        assert!(info.reference && is_reference(&idr));
        assert_eq!(info.slices, 1);
        assert_eq!(
            nal_units(&idr).map(|u| u[0] & 0x1f).collect::<Vec<_>>(),
            [7, 8, 5]
        );
        // A non-IDR slice of type 6 (B): first_mb 0 ("1"), "00111" = 6.
        let b = [0, 0, 1, 0x01, 0b1001_1100];
        let info = inspect(&b);
        assert!(info.b_slice && !info.idr && info.annex_b);
        // nal_ref_idc 0: nothing predicts from it.
        assert!(!info.reference && !is_reference(&b));
        assert!(is_reference(&[0, 0, 1, 0x41, 0x80]) && is_reference(&[0, 0, 1, 0x06, 5]));
        // Type 5 (P): "00110".
        assert!(!inspect(&[0, 0, 1, 0x41, 0b1001_1000]).b_slice);
        assert!(!inspect(&[9, 9, 0, 0, 1, 0x41, 0x80]).annex_b);
        assert_eq!(inspect(&[]), AccessUnitInfo::default());
        assert!(is_idr(&idr) && !is_idr(&b) && !is_idr(&[]));
    }

    #[test]
    fn units_end_before_the_next_start_code_of_either_length() {
        // An SEI, then a 4-byte start code, then a P slice, then a 3-byte one and an IDR
        // slice (never both in one picture: only the first slice decides).
        let unit = [
            9, 0, 0, 1, 0x06, 7, 0, 0, 0, 1, 0x41, 0x80, 0, 0, 1, 0x65, 0x88,
        ];
        let units: Vec<&[u8]> = nal_units(&unit).collect();
        assert_eq!(units, [&[0x06, 7][..], &[0x41, 0x80], &[0x65, 0x88]]);
        assert!(!is_idr(&unit) && is_reference(&unit));
        assert_eq!(nal_units(&[0, 0, 1]).collect::<Vec<_>>(), [&[] as &[u8]]);
        assert_eq!(nal_units(&[1, 2, 3]).count(), 0);
    }
}
