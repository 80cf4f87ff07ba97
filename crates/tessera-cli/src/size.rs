//! Sizes on the command line: `4096`, `8k`, `128MiB`, `1g`, `10GB`.
//!
//! `k`, `m`, `g`, `t` (alone, or as `KiB`, `MiB`, ...) are powers of 1024, as IOR and most HPC
//! tools read them; `KB`, `MB`, `GB`, `TB` are powers of 1000. Case does not matter.

/// Parses a size with an optional unit suffix.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.replace('_', "").parse().map_err(|_| {
        format!("'{text}' is not a size: use a number with an optional unit (4096, 8k, 128MiB, 1g)")
    })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "'{text}': unknown unit '{other}'; use k, m, g, t (powers of 1024, also KiB ...) or KB, MB, GB, TB (powers of 1000)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{text}' is larger than 2^64 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("128MiB"), Ok(128 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("10GB"), Ok(10_000_000_000));
        assert_eq!(parse_size(" 64 m "), Ok(64 << 20));
        assert_eq!(parse_size("1_000"), Ok(1000));
        assert!(parse_size("12q").unwrap_err().contains("unknown unit"));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("20000000t").unwrap_err().contains("2^64"));
    }
}
