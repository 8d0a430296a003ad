//! Salt's `salt.utils.jid.jid_to_time`: the start time a job id spells,
//! in the wording Salt's messages and job listings use.

/// Month abbreviations as Salt's `salt.utils.jid.months` has them.
const MONTHS: [&str; 13] = [
    "", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `20261125230000123456` -> `2026, Nov 25 23:00:00.123456`, as Salt's
/// `jid_to_time`; empty for anything that is not a 20-digit jid
/// (optionally followed by `_suffix`), where Salt returns `""` too.
pub fn jid_to_time(jid: &str) -> String {
    let bytes = jid.as_bytes();
    let shaped = bytes.len() == 20 || (bytes.len() > 21 && bytes[20] == b'_');
    if !shaped || !bytes[..20].iter().all(u8::is_ascii_digit) {
        return String::new();
    }
    let month = jid[4..6].parse::<usize>().unwrap_or(0);
    let Some(name) = MONTHS.get(month).filter(|m| !m.is_empty()) else {
        return String::new();
    };
    format!(
        "{}, {} {} {}:{}:{}.{}",
        &jid[..4],
        name,
        &jid[6..8],
        &jid[8..10],
        &jid[10..12],
        &jid[12..14],
        &jid[14..20]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spells_the_time_as_salt_does() {
        assert_eq!(
            jid_to_time("20261125235740294873"),
            "2026, Nov 25 23:57:40.294873"
        );
        assert_eq!(
            jid_to_time("20260102030405000006_2"),
            "2026, Jan 02 03:04:05.000006"
        );
        assert_eq!(jid_to_time("req"), "");
        assert_eq!(jid_to_time("20261325235740294873"), "");
    }
}
