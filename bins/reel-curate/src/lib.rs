//! The curation commands as a library: [`curate`] (`reel-curate`, `reel curate`) runs one
//! SQL query over the episode warehouse into a training manifest; [`compact`]
//! (`reel-compact`, `reel compact`) writes the warehouse's latest-ingestion view once so
//! queries scan it instead of deduplicating the log.

pub mod compact;
pub mod curate;
