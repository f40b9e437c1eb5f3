//! The settings that decide what ingest produces, and their digest.

use reel_manifest::fnv1a;
use serde::{Deserialize, Serialize};

use crate::qc::QcConfig;
use crate::resample::{Grid, ResampleConfig};
use crate::segment::check_segment;
use crate::{Error, PIPELINE_VERSION, Result};
use reel_landing::{EncodeConfig, PackConfig, TopicConfig};

/// Everything that decides what ingest produces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Stamped on every output; artifacts of another version are stale.
    pub pipeline_version: String,
    /// Grid rates and gap bound.
    pub resample: ResampleConfig,
    /// Quality-check thresholds.
    pub qc: QcConfig,
    /// Video and chunking.
    pub encode: EncodeConfig,
    /// Topic rules (skip, group, role, values), `reel-pack`'s own.
    pub topics: TopicConfig,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            pipeline_version: PIPELINE_VERSION.into(),
            resample: ResampleConfig::default(),
            qc: QcConfig::default(),
            encode: EncodeConfig::default(),
            topics: TopicConfig::default(),
        }
    }
}

impl PipelineConfig {
    /// Digest of the settings that shape the outputs (not the version): artifacts made
    /// with other settings are not reused.
    pub fn digest(&self) -> Result<String> {
        let shaping = (&self.resample, &self.qc, &self.encode);
        // Default topic settings are left out, so episodes ingested before topic rules
        // existed stay current.
        let text = if self.topics == TopicConfig::default() {
            serde_json::to_string(&shaping)
        } else {
            serde_json::to_string(&(shaping, &self.topics))
        };
        let text = text.map_err(|source| Error::Json {
            name: "pipeline config".into(),
            source,
        })?;
        Ok(format!("{:016x}", fnv1a(text.bytes())))
    }

    /// The as-recorded profile of a `reel-pack` config (`[encode]`, the topic settings
    /// and `[[topic]]` rules at its top level): streams written at their recorded times.
    pub fn as_recorded(pack: &PackConfig) -> Self {
        let mut config = Self {
            encode: pack.encode.clone(),
            topics: pack.topic_config(),
            ..Self::default()
        };
        config.resample.grid = Grid::AsRecorded;
        config
    }

    /// Parses a `reel-pack` TOML config into the as-recorded profile
    /// ([`PipelineConfig::as_recorded`]); `name` is used in errors.
    pub fn from_pack_toml(name: &str, text: &str) -> Result<Self> {
        let pack = PackConfig::from_toml(name, text)?;
        Ok(Self::as_recorded(&pack))
    }

    /// The encoding and topic settings as `reel-pack`'s config holds them.
    pub fn pack_config(&self) -> PackConfig {
        PackConfig {
            encode: self.encode.clone(),
            other_group: self.topics.other_group.clone(),
            skip_unknown: self.topics.skip_unknown,
            skip_bad_frames: self.topics.skip_bad_frames,
            topics: self.topics.rules.clone(),
        }
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<()> {
        check_segment("pipeline version", &self.pipeline_version)?;
        self.resample.validate()?;
        self.qc.validate()?;
        self.encode
            .validate("encode")
            .and_then(|()| self.topics.validate("topics"))
            .map_err(|e| Error::Config(e.to_string()))
    }

    /// Parses a config read from `name` (a path or a store URI): JSON when the name ends
    /// in `.json` (a URI's query aside), TOML, Reel's config format, otherwise.
    pub fn from_named(name: &str, text: &str) -> Result<Self> {
        let path = name.split('?').next().unwrap_or(name);
        if path.ends_with(".json") {
            Self::from_json(name, text)
        } else {
            Self::from_toml(name, text)
        }
    }

    /// Parses a JSON config (`pipeline_version` and `resample`, `qc`, `encode`, `topics`
    /// objects, each optional); `name` is used in errors.
    pub fn from_json(name: &str, text: &str) -> Result<Self> {
        let config: Self = serde_json::from_str(text).map_err(|source| Error::Json {
            name: name.to_owned(),
            source,
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Parses a TOML config, the same settings as [`PipelineConfig::from_json`]
    /// (`pipeline_version`, then `[resample]`, `[qc]`, `[encode]`, `[topics]` tables, each
    /// optional; rules as `[[topics.topic]]`);
    /// `name` is used in errors.
    pub fn from_toml(name: &str, text: &str) -> Result<Self> {
        let config: Self = toml::from_str(text)
            .map_err(|e| Error::Config(format!("{name}: invalid TOML: {e}")))?;
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_configs_read_like_json_ones() -> Result<()> {
        let from_toml = PipelineConfig::from_toml(
            "ingest.toml",
            "pipeline_version = \"2.1\"\n[resample]\nstate_hz = 100.0\n[qc]\nmin_frozen_s = 2.0\n",
        )?;
        let from_json = PipelineConfig::from_json(
            "ingest.json",
            r#"{"pipeline_version": "2.1", "resample": {"state_hz": 100}, "qc": {"min_frozen_s": 2}}"#,
        )?;
        assert_eq!(from_toml, from_json);
        let error = PipelineConfig::from_toml("ingest.toml", "[qc]\nno_such_threshold = 1\n")
            .expect_err("unknown field")
            .to_string();
        assert!(
            error.contains("ingest.toml") && error.contains("no_such_threshold"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn configs_parse_partially_and_reject_bad_values() -> Result<()> {
        let config = PipelineConfig::from_json(
            "ingest.json",
            r#"{"pipeline_version": "2.1", "resample": {"state_hz": 100}, "qc": {"min_frozen_s": 2}}"#,
        )
        .expect("parses");
        assert_eq!(config.resample.state_hz, 100.0);
        assert_eq!(config.resample.camera_hz, 30.0);
        assert_eq!(config.qc.min_frozen_s, 2.0);
        assert_ne!(config.digest()?, PipelineConfig::default().digest()?);
        for bad in [
            r#"{"resample": {"state_hz": 0}}"#,
            r#"{"qc": {"choppy_ratio": 3}}"#,
            r#"{"encode": {"gop": 0}}"#,
            r#"{"pipeline_version": "../x"}"#,
            r#"{"resample": {"typo": 1}}"#,
        ] {
            let err = PipelineConfig::from_json("ingest.json", bad).expect_err(bad);
            assert!(
                matches!(err, Error::Config(_) | Error::Json { .. }),
                "{bad}: {err}"
            );
        }
        Ok(())
    }

    #[test]
    fn the_default_encoder_leaves_the_digest_as_it_was() -> Result<()> {
        // The default encoder is left out of the digest, so canonical episodes made
        // before the encoder could be chosen stay current.
        let default = PipelineConfig::default();
        let mut other = default.clone();
        other.encode.encoder = "libopenh264".into();
        assert_ne!(default.digest()?, other.digest()?);
        let json = serde_json::to_string(&default.encode).map_err(|source| Error::Json {
            name: "encode".into(),
            source,
        })?;
        assert!(!json.contains("encoder"), "{json}");
        // Likewise the GOP structure and chunk compression while they are the defaults.
        assert!(
            !json.contains("structure") && !json.contains("compress"),
            "{json}"
        );
        Ok(())
    }

    #[test]
    fn topic_rules_read_alike_in_both_configs() -> Result<()> {
        let rules = "[[topic]]\nmatch = \"/diagnostics\"\nskip = true\n\
                     [[topic]]\nmatch = \"/action\"\nrole = \"state\"\n";
        let pack = PipelineConfig::from_pack_toml(
            "pack.toml",
            &format!("skip_unknown = true\n[encode]\ngop = 15\n{rules}"),
        )?;
        assert_eq!(pack.resample.grid, Grid::AsRecorded);
        assert_eq!(pack.encode.gop, 15);
        let ingest = PipelineConfig::from_toml(
            "ingest.toml",
            &format!(
                "[topics]\nskip_unknown = true\n{}",
                rules.replace("[[topic]]", "[[topics.topic]]")
            ),
        )?;
        assert_eq!(ingest.topics, pack.topics);
        assert!(pack.topics.skips("/diagnostics") && !pack.topics.skips("/action"));
        assert_eq!(pack.pack_config().topic_config(), pack.topics);
        let bad_role = "[[topics.topic]]\nmatch = \"/a\"\nrole = \"speed\"\n";
        let error = PipelineConfig::from_toml("ingest.toml", bad_role).expect_err("bad role");
        assert!(error.to_string().contains("speed"), "{error}");
        Ok(())
    }

    #[test]
    fn default_topics_and_grid_leave_the_digest_as_it_was() -> Result<()> {
        // Episodes ingested before topic rules and grids existed stay current.
        let default = PipelineConfig::default();
        let shaping = (&default.resample, &default.qc, &default.encode);
        let text = serde_json::to_string(&shaping).map_err(|source| Error::Json {
            name: "config".into(),
            source,
        })?;
        assert!(!text.contains("grid"), "{text}");
        assert_eq!(default.digest()?, format!("{:016x}", fnv1a(text.bytes())));
        let mut skipping = default.clone();
        skipping.topics.skip_unknown = true;
        assert_ne!(skipping.digest()?, default.digest()?);
        Ok(())
    }

    #[test]
    fn the_name_says_json_or_toml() -> Result<()> {
        let json = PipelineConfig::from_named(
            "s3://b/ingest.json?region=x",
            r#"{"qc": {"min_frozen_s": 2}}"#,
        )?;
        let toml = PipelineConfig::from_named("ingest.toml", "[qc]\nmin_frozen_s = 2.0\n")?;
        assert_eq!(json, toml);
        assert!(PipelineConfig::from_named("ingest.toml", r#"{"qc": {}}"#).is_err());
        Ok(())
    }
}
