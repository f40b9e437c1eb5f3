//! Topic rules: which landing topics are left out, which group each goes to, what a
//! numeric topic measures and which of its values are kept. Both ways a landing log
//! becomes a canonical episode (as recorded, or on a resampled grid) read it through
//! [`TopicConfig::skips`] and then [`TopicConfig::apply`], so a rule means the same in
//! either.

use std::collections::BTreeMap;

use reel_mcap::{Error, RecordedStream, RecordedTopic, Result, SignalKind};
use serde::{Deserialize, Serialize};

use crate::encoding::EncodeConfig;
use crate::episode::{LandingEpisode, LandingSignal};

/// Assigns topics matching a pattern to a group, or skips them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicRule {
    /// Topic pattern; `*` matches any run of characters (`/camera/*`).
    #[serde(rename = "match")]
    pub pattern: String,
    /// Group to put matching topics in.
    #[serde(default)]
    pub group: Option<String>,
    /// Leave matching topics out of the canonical episode.
    #[serde(default)]
    pub skip: bool,
    /// What matching numeric topics measure (`state`, `action`, `pose` or `signal`),
    /// instead of what Reel infers from the message type and topic name.
    #[serde(default)]
    pub role: Option<String>,
    /// The values to keep from matching numeric topics, by name and in this order
    /// (`["temperature", "limits[0]"]`), instead of all of them.
    #[serde(default)]
    pub fields: Option<Vec<String>>,
}

impl TopicRule {
    fn matches(&self, topic: &str) -> bool {
        glob_match(&self.pattern, topic)
    }
}

fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// What becomes of each landing topic. Every field has a default; in TOML:
///
/// ```toml
/// skip_unknown = false
/// [[topic]]
/// match = "/camera/*"
/// group = "cameras"
/// [[topic]]
/// match = "/diagnostics"
/// skip = true
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicConfig {
    /// Group of topics kept as recorded (nothing reads them, or none of their messages
    /// decoded).
    pub other_group: String,
    /// Leave the topics Reel does not read out (listed as skipped) instead of keeping them
    /// as recorded in `other_group`.
    pub skip_unknown: bool,
    /// Drop landing frames that do not decode instead of failing. Written as recorded, a
    /// frame that does not decode otherwise fails the episode; on a resampled grid its
    /// grid points always show the previous frame and the quality checks flag it.
    pub skip_bad_frames: bool,
    /// Topic rules, first match wins.
    #[serde(rename = "topic")]
    pub rules: Vec<TopicRule>,
}

impl Default for TopicConfig {
    fn default() -> Self {
        Self {
            other_group: reel_mcap::keys::OTHER_GROUP.into(),
            skip_unknown: false,
            skip_bad_frames: false,
            rules: Vec::new(),
        }
    }
}

/// A landing episode with the topic rules applied, and the group of each of its topics.
#[derive(Debug, Clone)]
pub struct RuledEpisode {
    /// The episode: rules' roles and values applied, skipped topics left out.
    pub episode: LandingEpisode,
    /// The group of each of its topics.
    pub groups: TopicGroups,
}

/// The group of each topic of a landing episode, as its topic rules decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicGroups {
    groups: BTreeMap<String, String>,
    other_group: String,
}

impl TopicGroups {
    /// The group of a topic (`other_group` for one the episode does not have).
    pub fn group_of(&self, topic: &str) -> &str {
        self.groups.get(topic).unwrap_or(&self.other_group)
    }

    /// `other`, the topics kept as recorded, each in its group.
    pub fn recorded_streams(&self, other: &[RecordedTopic]) -> Vec<RecordedStream> {
        (other.iter())
            .map(|recorded| RecordedStream {
                group: self.group_of(&recorded.topic).to_owned(),
                recorded: recorded.clone(),
            })
            .collect()
    }
}

impl TopicConfig {
    /// Checks the rules; `name` (the config) is used in errors.
    pub fn validate(&self, name: &str) -> Result<()> {
        for rule in &self.rules {
            if let Some(role) = &rule.role
                && SignalKind::from_name(role).is_none()
            {
                return Err(Error::Config {
                    name: name.into(),
                    reason: format!(
                        "topic rule `{}`: role `{role}` is not state, action, pose or signal",
                        rule.pattern
                    ),
                });
            }
        }
        Ok(())
    }

    /// Whether a rule leaves `topic` out: the predicate to read a landing log with.
    pub fn skips(&self, topic: &str) -> bool {
        self.rule(topic).is_some_and(|r| r.skip)
    }

    fn rule(&self, topic: &str) -> Option<&TopicRule> {
        self.rules.iter().find(|r| r.matches(topic))
    }

    fn group_of(&self, topic: &str, default: &str) -> String {
        self.rule(topic)
            .and_then(|r| r.group.clone())
            .unwrap_or_else(|| default.to_owned())
    }

    /// Applies the rules to an episode read with [`TopicConfig::skips`]: each numeric
    /// topic takes its rule's role and values, the topics Reel does not read are skipped
    /// with `skip_unknown`, and every topic gets its group (a rule's, else the default of
    /// its kind in `encode`, or `other_group`). `name` (the recording) is used in errors.
    pub fn apply(
        &self,
        name: &str,
        mut episode: LandingEpisode,
        encode: &EncodeConfig,
    ) -> Result<RuledEpisode> {
        for signal in &mut episode.signals {
            if let Some(rule) = self.rule(&signal.topic) {
                apply_rule(name, signal, rule)?;
            }
        }
        if self.skip_unknown {
            for recorded in std::mem::take(&mut episode.other) {
                episode.skipped.insert(recorded.topic, recorded.schema);
            }
        }
        let cameras = (episode.cameras.iter().chain(&episode.depths))
            .map(|c| (&c.topic, &encode.camera_group));
        let signals = (episode.signals.iter()).map(|s| (&s.topic, &encode.signal_group));
        let other = (episode.other.iter()).map(|r| (&r.topic, &self.other_group));
        let groups = cameras
            .chain(signals)
            .chain(other)
            .map(|(topic, default)| (topic.clone(), self.group_of(topic, default)))
            .collect();
        Ok(RuledEpisode {
            episode,
            groups: TopicGroups {
                groups,
                other_group: self.other_group.clone(),
            },
        })
    }
}

/// Applies a topic rule's `role` and `fields` to a numeric stream.
fn apply_rule(name: &str, signal: &mut LandingSignal, rule: &TopicRule) -> Result<()> {
    if let Some(kind) = rule.role.as_deref().and_then(SignalKind::from_name) {
        signal.kind = kind;
    }
    let Some(wanted) = &rule.fields else {
        return Ok(());
    };
    let index = wanted
        .iter()
        .map(|w| {
            signal
                .fields
                .iter()
                .position(|f| f == w)
                .ok_or_else(|| Error::Config {
                    name: name.into(),
                    reason: format!(
                        "topic rule `{}`: `{}` has no value `{w}` (it has {})",
                        rule.pattern,
                        signal.topic,
                        signal.fields.join(", ")
                    ),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    signal.fields = wanted.clone();
    for sample in &mut signal.samples {
        // A sample has a value per field of its stream, so every index is in range.
        sample.values = index
            .iter()
            .filter_map(|&i| sample.values.get(i).copied())
            .collect();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("/camera/*", "/camera/high/image_raw/compressed"));
        assert!(glob_match("*action*", "/robot/action_chunk"));
        assert!(glob_match("/joint_states", "/joint_states"));
        assert!(!glob_match("/joint_states", "/joint_states2"));
        assert!(!glob_match("/camera/*/x", "/camera/x"));
    }
}
