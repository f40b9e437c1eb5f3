//! Byte counts with units, for flags such as `--capacity 64GiB` or `--batch-bytes 10MB`.

/// Why a size did not parse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// No number where one was expected.
    #[error(
        "`{text}` is not a size (expected a number and an optional unit, e.g. 64KiB, 1.5GiB, 10MB)"
    )]
    NotANumber {
        /// The text as given.
        text: String,
    },
    /// A unit this parser does not know.
    #[error(
        "unknown size unit `{unit}` in `{text}` (use B, K/KiB, M/MiB, G/GiB, T/TiB, P/PiB or KB, MB, GB, TB, PB)"
    )]
    UnknownUnit {
        /// The text as given.
        text: String,
        /// The unit part.
        unit: String,
    },
    /// More bytes than fit in 64 bits.
    #[error("`{text}` is too large")]
    TooLarge {
        /// The text as given.
        text: String,
    },
}

/// Parses a byte count with an optional unit: `512`, `64KiB`, `1.5GiB`, `10MB`, `2G`.
///
/// Units are case-insensitive and may follow the number after a space.
/// Binary (powers of 1024): the IEC names `KiB`, `MiB`, `GiB`, `TiB`, `PiB` and the bare
/// letters `K`, `M`, `G`, `T`, `P` (as `dd`, `sort -S` and Reel's earlier flags read them).
/// Decimal (powers of 1000): the SI names with a `B`, `KB`, `MB`, `GB`, `TB`, `PB`, as
/// disk and network vendors count. `B` or no unit is bytes. A fraction (`1.5GiB`) is
/// rounded down to whole bytes.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let not_a_number = || SizeError::NotANumber {
        text: text.to_owned(),
    };
    if number.is_empty() || number == "." {
        return Err(not_a_number());
    }
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "p" | "pib" => 1 << 50,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        _ => {
            return Err(SizeError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.trim().to_owned(),
            });
        }
    };
    let too_large = || SizeError::TooLarge {
        text: text.to_owned(),
    };
    match number.split_once('.') {
        // Whole numbers stay exact in integers: f64 would round sizes above 2^53.
        None => number
            .parse::<u64>()
            .map_err(|_| too_large())?
            .checked_mul(multiplier)
            .ok_or_else(too_large),
        Some((whole, fraction)) => {
            if fraction.contains('.') {
                return Err(not_a_number());
            }
            let whole: u64 = if whole.is_empty() {
                0
            } else {
                whole.parse().map_err(|_| too_large())?
            };
            let fraction: f64 = format!("0.{fraction}")
                .parse()
                .map_err(|_| not_a_number())?;
            let whole_bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
            // The fractional part is below one unit, so it fits in f64 exactly enough.
            let fraction_bytes = (fraction * multiplier as f64).floor() as u64;
            whole_bytes
                .checked_add(fraction_bytes)
                .ok_or_else(too_large)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_units() -> Result<(), SizeError> {
        assert_eq!(parse_size("512")?, 512);
        assert_eq!(parse_size("512B")?, 512);
        assert_eq!(parse_size("64KiB")?, 65_536);
        assert_eq!(parse_size("64k")?, 65_536);
        assert_eq!(parse_size("4M")?, 4 << 20);
        assert_eq!(parse_size("2G")?, 2 << 30);
        assert_eq!(parse_size("1.5GiB")?, 1_610_612_736);
        assert_eq!(parse_size("10MB")?, 10_000_000);
        assert_eq!(parse_size("10 mb")?, 10_000_000);
        assert_eq!(parse_size("3TB")?, 3_000_000_000_000);
        assert_eq!(parse_size("0.5K")?, 512);
        assert_eq!(parse_size(".25KiB")?, 256);
        assert_eq!(parse_size("18446744073709551615")?, u64::MAX);
        Ok(())
    }

    #[test]
    fn nonsense_is_refused_with_a_reason() {
        for (text, expect) in [
            ("", "not a size"),
            ("KiB", "not a size"),
            ("1.2.3M", "not a size"),
            ("-5M", "not a size"),
            ("12 parsecs", "unknown size unit `parsecs`"),
            ("4Mi", "unknown size unit `Mi`"),
            ("16EiB", "unknown size unit"),
            ("20000000P", "too large"),
            ("99999999999999999999", "too large"),
        ] {
            let error = parse_size(text).expect_err(text).to_string();
            assert!(error.contains(expect), "{text}: {error}");
        }
    }
}
