//! Rewriting libx264's headers so that separately encoded frames form one stream: the
//! sequence parameter set moved to explicit picture order counts, and slices renumbered
//! and marked as non-reference pictures. Slice data is copied bit for bit; only the
//! syntax before it changes. Written for what libx264 emits with Reel's star settings
//! (progressive frames, CAVLC, no weighted prediction, one PPS); anything else is refused
//! with the reason, never passed on half-rewritten.

use super::bits::{BitReader, BitWriter, escape, unescape};
use super::{nal, nal_units};

type Result<T> = std::result::Result<T, String>;

/// What the slice rewriter needs from the stream's parameter sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParameterSets {
    log2_max_frame_num: u32,
    separate_colour_plane: bool,
    /// `entropy_coding_mode_flag`: CABAC data starts byte-aligned after the header, so a
    /// header of another length would need its alignment redone.
    cabac: bool,
    weighted_pred: bool,
    redundant_pic_cnt: bool,
}

/// How one access unit is rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rewrite {
    /// `log2_max_pic_order_cnt_lsb` of the rewritten SPS.
    pub(crate) log2_max_poc_lsb: u32,
    /// The picture's `pic_order_cnt_lsb`.
    pub(crate) poc_lsb: u32,
    /// `idr_pic_id` of an IDR picture (consecutive IDRs must differ).
    pub(crate) idr_pic_id: u32,
    /// Mark the picture as one nothing predicts from (`nal_ref_idc` 0).
    pub(crate) non_reference: bool,
}

const HIGH_PROFILES: [u32; 13] = [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135];

fn short(what: &str) -> impl Fn() -> String + '_ {
    move || format!("{what} ends early")
}

/// The SPS fields up to `pic_order_cnt_type`, copied to `w` as read, with what they say.
struct SpsHead {
    log2_max_frame_num: u32,
    separate_colour_plane: bool,
    poc_type: u32,
}

fn sps_head(r: &mut BitReader, w: &mut BitWriter) -> Result<SpsHead> {
    let end = short("SPS");
    let profile = r.bits(8).ok_or_else(&end)?;
    w.bits(profile, 8);
    let constraints_and_level = r.bits(16).ok_or_else(&end)?;
    w.bits(constraints_and_level, 16);
    let id = r.ue().ok_or_else(&end)?;
    w.ue(id);
    let mut separate_colour_plane = false;
    if HIGH_PROFILES.contains(&profile) {
        let chroma_format = r.ue().ok_or_else(&end)?;
        w.ue(chroma_format);
        if chroma_format == 3 {
            let flag = r.bit().ok_or_else(&end)?;
            w.bit(flag);
            separate_colour_plane = flag == 1;
        }
        for _ in 0..2 {
            let depth = r.ue().ok_or_else(&end)?;
            w.ue(depth);
        }
        let bypass = r.bit().ok_or_else(&end)?;
        w.bit(bypass);
        if r.bit().ok_or_else(&end)? == 1 {
            return Err("SPS with scaling matrices".into());
        }
        w.bit(0);
    }
    let log2_max_frame_num = r.ue().ok_or_else(&end)? + 4;
    w.ue(log2_max_frame_num - 4);
    let poc_type = r.ue().ok_or_else(&end)?;
    Ok(SpsHead {
        log2_max_frame_num,
        separate_colour_plane,
        poc_type,
    })
}

/// The SPS RBSP with picture order counts sent in every slice (`pic_order_cnt_type` 0)
/// instead of derived from `frame_num` (type 2, which cannot number two non-reference
/// frames in a row).
fn rewrite_sps(rbsp: &[u8], log2_max_poc_lsb: u32) -> Result<(Vec<u8>, SpsHead)> {
    let mut r = BitReader::new(rbsp);
    let mut w = BitWriter::default();
    let head = sps_head(&mut r, &mut w)?;
    if head.poc_type != 2 {
        return Err(format!(
            "SPS with pic_order_cnt_type {} (expected 2: no B-frames)",
            head.poc_type
        ));
    }
    w.ue(0);
    w.ue(log2_max_poc_lsb - 4);
    // max_num_ref_frames .. frame_mbs_only_flag: checked, then copied with the rest.
    let rest = r.rest_before_stop_bit().ok_or_else(short("SPS"))?;
    let mut check = r.clone();
    check.ue().ok_or_else(short("SPS"))?; // max_num_ref_frames
    check.bit().ok_or_else(short("SPS"))?; // gaps_in_frame_num_value_allowed_flag
    check.ue().ok_or_else(short("SPS"))?; // pic_width_in_mbs_minus1
    check.ue().ok_or_else(short("SPS"))?; // pic_height_in_map_units_minus1
    if check.bit().ok_or_else(short("SPS"))? != 1 {
        return Err("SPS for interlaced coding (frame_mbs_only_flag 0)".into());
    }
    w.copy(r.data(), rest);
    Ok((w.finish(), head))
}

fn parse_pps(rbsp: &[u8]) -> Result<(bool, bool, bool, bool)> {
    let end = short("PPS");
    let mut r = BitReader::new(rbsp);
    r.ue().ok_or_else(&end)?; // pps id
    r.ue().ok_or_else(&end)?; // sps id
    let cabac = r.bit().ok_or_else(&end)? == 1;
    let bottom_field_poc = r.bit().ok_or_else(&end)? == 1;
    if r.ue().ok_or_else(&end)? != 0 {
        return Err("PPS with slice groups".into());
    }
    r.ue().ok_or_else(&end)?;
    r.ue().ok_or_else(&end)?;
    let weighted_pred = r.bit().ok_or_else(&end)? == 1;
    r.bits(2).ok_or_else(&end)?; // weighted_bipred_idc
    for _ in 0..3 {
        r.ue().ok_or_else(&end)?; // pic_init_qp, pic_init_qs, chroma_qp_index_offset (se)
    }
    r.bit().ok_or_else(&end)?; // deblocking_filter_control_present
    r.bit().ok_or_else(&end)?; // constrained_intra_pred
    let redundant_pic_cnt = r.bit().ok_or_else(&end)? == 1;
    Ok((cabac, bottom_field_poc, weighted_pred, redundant_pic_cnt))
}

impl ParameterSets {
    /// Reads the SPS and PPS an access unit carries (a keyframe with repeated headers).
    pub(crate) fn from_access_unit(access_unit: &[u8]) -> Result<Self> {
        let mut sps = None;
        let mut pps = None;
        for unit in nal_units(access_unit) {
            match unit.first().map(|h| h & 0x1f) {
                Some(nal::SPS) => {
                    let rbsp = unescape(&unit[1..]);
                    sps = Some(sps_head(
                        &mut BitReader::new(&rbsp),
                        &mut BitWriter::default(),
                    )?);
                }
                Some(nal::PPS) => pps = Some(parse_pps(&unescape(&unit[1..]))?),
                _ => {}
            }
        }
        let sps = sps.ok_or("no SPS in the keyframe")?;
        let (cabac, bottom_field_poc, weighted_pred, redundant_pic_cnt) =
            pps.ok_or("no PPS in the keyframe")?;
        if bottom_field_poc {
            return Err("PPS with bottom_field_pic_order_in_frame_present_flag".into());
        }
        Ok(Self {
            log2_max_frame_num: sps.log2_max_frame_num,
            separate_colour_plane: sps.separate_colour_plane,
            cabac,
            weighted_pred,
            redundant_pic_cnt,
        })
    }
}

/// Rewrites one slice NAL unit (header byte included).
fn rewrite_slice(unit: &[u8], sets: &ParameterSets, rewrite: &Rewrite) -> Result<Vec<u8>> {
    let end = short("slice header");
    let header = unit[0];
    let idr = header & 0x1f == nal::IDR;
    let reference = header & 0x60 != 0;
    if sets.cabac {
        return Err("CABAC slices (the star settings use CAVLC)".into());
    }
    if idr && rewrite.non_reference {
        return Err("an IDR picture is always a reference".into());
    }
    let rbsp = unescape(&unit[1..]);
    let mut r = BitReader::new(&rbsp);
    let mut w = BitWriter::default();
    let first_mb = r.ue().ok_or_else(&end)?;
    w.ue(first_mb);
    let slice_type = r.ue().ok_or_else(&end)?;
    w.ue(slice_type);
    let pps_id = r.ue().ok_or_else(&end)?;
    w.ue(pps_id);
    if sets.separate_colour_plane {
        let plane = r.bits(2).ok_or_else(&end)?;
        w.bits(plane, 2);
    }
    let frame_num = r.bits(sets.log2_max_frame_num).ok_or_else(&end)?;
    w.bits(frame_num, sets.log2_max_frame_num);
    if idr {
        r.ue().ok_or_else(&end)?;
        w.ue(rewrite.idr_pic_id);
    }
    w.bits(rewrite.poc_lsb, rewrite.log2_max_poc_lsb);
    if sets.redundant_pic_cnt {
        return Err("slices with redundant_pic_cnt".into());
    }
    match slice_type % 5 {
        0 => {
            // P: num_ref_idx_active_override, then ref_pic_list_modification.
            let overridden = r.bit().ok_or_else(&end)?;
            w.bit(overridden);
            if overridden == 1 {
                let count = r.ue().ok_or_else(&end)?;
                w.ue(count);
            }
            let modified = r.bit().ok_or_else(&end)?;
            w.bit(modified);
            if modified == 1 {
                loop {
                    let idc = r.ue().ok_or_else(&end)?;
                    w.ue(idc);
                    if idc == 3 {
                        break;
                    }
                    let value = r.ue().ok_or_else(&end)?;
                    w.ue(value);
                }
            }
            if sets.weighted_pred {
                return Err("P slices with weighted prediction".into());
            }
        }
        2 => {}
        other => return Err(format!("slice_type {other} (only I and P are expected)")),
    }
    if reference {
        if idr {
            let flags = r.bits(2).ok_or_else(&end)?;
            w.bits(flags, 2);
        } else {
            let adaptive = r.bit().ok_or_else(&end)?;
            if adaptive == 1 {
                return Err("slices with memory management operations".into());
            }
            if !rewrite.non_reference {
                w.bit(adaptive);
            }
        }
    }
    let rest = r.rest_before_stop_bit().ok_or_else(&end)?;
    w.copy(&rbsp, rest);
    let ref_idc = if rewrite.non_reference {
        0
    } else {
        header & 0x60
    };
    let mut out = vec![(header & 0x9f) | ref_idc];
    out.extend(escape(&w.finish()));
    Ok(out)
}

/// Rewrites an access unit as `rewrite` says: its SPS (if any) to explicit picture order
/// counts, its slices renumbered and marked; other NAL units copied.
pub(crate) fn rewrite_access_unit(
    access_unit: &[u8],
    sets: &ParameterSets,
    rewrite: &Rewrite,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(access_unit.len() + 16);
    for unit in nal_units(access_unit) {
        let Some(&header) = unit.first() else {
            continue;
        };
        let rewritten = match header & 0x1f {
            nal::SPS => {
                let (rbsp, _) = rewrite_sps(&unescape(&unit[1..]), rewrite.log2_max_poc_lsb)?;
                let mut sps = vec![header];
                sps.extend(escape(&rbsp));
                sps
            }
            nal::SLICE | nal::IDR => rewrite_slice(unit, sets, rewrite)?,
            _ => unit.to_vec(),
        };
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend(rewritten);
    }
    Ok(out)
}
