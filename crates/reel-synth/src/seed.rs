//! Seeds for one episode: one per purpose, each independent of the others.

use crate::config::SynthConfig;

/// A seed for one purpose within one episode, independent of the others so
/// that changing one stream never perturbs another.
pub(crate) fn sub_seed(config: &SynthConfig, index: u64, purpose: u64) -> u64 {
    let mut z = (config.seed
        ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ purpose.wrapping_mul(0xd1b5_4a32_d192_ed03))
    .wrapping_add(0x2545_f491_4f6c_dd1d);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
