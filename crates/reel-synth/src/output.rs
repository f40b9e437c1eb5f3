//! Episodes generated into memory, or written to disk with their fault sidecar (under
//! temporary names, then renamed).

use std::io::Cursor;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::SynthConfig;
use crate::error::SynthError;
use crate::faults::FaultLog;
use crate::generate::{EpisodeReport, generate_episode_to};
use crate::meta::episode_meta;

/// One episode held in memory.
#[derive(Debug, Clone)]
pub struct SynthEpisode {
    /// File stem (`<episode_id>`).
    pub name: String,
    pub mcap: Vec<u8>,
    pub faults: FaultLog,
    pub report: EpisodeReport,
}

/// An episode written to disk.
#[derive(Debug, Clone, Serialize)]
pub struct WrittenEpisode {
    pub path: PathBuf,
    pub faults_path: PathBuf,
    #[serde(flatten)]
    pub report: EpisodeReport,
}

/// Generates episode `index` in memory.
pub fn generate_episode(config: &SynthConfig, index: u64) -> Result<SynthEpisode, SynthError> {
    let mut cursor = Cursor::new(Vec::new());
    let (faults, report) = generate_episode_to(config, index, &mut cursor)?;
    Ok(SynthEpisode {
        name: report.episode_id.clone(),
        mcap: cursor.into_inner(),
        faults,
        report,
    })
}

/// Writes episode `index` into `dir` as `<episode_id>.mcap` with its
/// `<episode_id>.faults.json` sidecar. Both are written under temporary
/// names and renamed, so a crash never leaves a half-written episode.
pub fn write_episode(
    config: &SynthConfig,
    index: u64,
    dir: &Path,
) -> Result<WrittenEpisode, SynthError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SynthError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let meta = episode_meta(config, index);
    let path = dir.join(format!("{}.mcap", meta.episode_id));
    let faults_path = dir.join(format!("{}.faults.json", meta.episode_id));
    let tmp = dir.join(format!(".{}.mcap.tmp", meta.episode_id));
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
    let (faults, report) = generate_episode_to(config, index, &mut writer)?;
    let file = writer.into_inner().map_err(|e| SynthError::Io {
        path: tmp.clone(),
        source: e.into_error(),
    })?;
    file.sync_all().map_err(io(&tmp))?;
    let tmp_faults = dir.join(format!(".{}.faults.json.tmp", meta.episode_id));
    std::fs::write(&tmp_faults, serde_json::to_vec_pretty(&faults)?).map_err(io(&tmp_faults))?;
    std::fs::rename(&tmp_faults, &faults_path).map_err(io(&faults_path))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    Ok(WrittenEpisode {
        path,
        faults_path,
        report,
    })
}
