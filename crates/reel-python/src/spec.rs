//! A sample spec from what a Python caller has at hand: a dict, TOML text, or the path
//! or store URI of a TOML file.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use reel_io::Kinded;
use reel_loader::SampleSpec;

use crate::errors::{OrRaise, bad_input, exception};

/// Reads `spec`, naming where it came from in any error.
pub fn sample_spec(spec: &Bound<'_, PyAny>) -> PyResult<SampleSpec> {
    if let Ok(dict) = spec.cast::<PyDict>() {
        // Through JSON, so the dict is read by the same serde definition as TOML.
        let json: String = spec
            .py()
            .import("json")?
            .call_method1("dumps", (dict,))?
            .extract()?;
        let parsed: SampleSpec = serde_json::from_str(&json)
            .map_err(|e| bad_input(format!("sample spec (dict): {e}")))?;
        parsed
            .validate()
            .map_err(|reason| bad_input(format!("sample spec (dict): {reason}")))?;
        return Ok(parsed);
    }
    let text: String = match spec.cast::<PyString>() {
        Ok(s) => s.to_str()?.to_owned(),
        Err(_) => {
            // A pathlib.Path or anything else os.fspath accepts.
            let path = spec.py().import("os")?.call_method1("fspath", (spec,))?;
            path.extract()?
        }
    };
    let looks_like_toml = text.contains('\n') || text.contains('=');
    let (name, toml) = if looks_like_toml {
        ("(TOML text)".to_owned(), text)
    } else {
        let toml = reel_io::read_text_input(&text).or_raise()?;
        (text, toml)
    };
    SampleSpec::from_toml_str(&toml).map_err(|e| match e {
        reel_loader::LoaderError::Spec { reason, .. } => {
            bad_input(format!("sample spec {name}: {reason}"))
        }
        other => exception(other.kind(), format!("sample spec {name}: {other}")),
    })
}
