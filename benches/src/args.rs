//! Values of the command's flags that several workloads read the same way.

/// Splits a comma-separated list, each item parsed by `item`, into `into` (items already
/// there are not added again).
pub fn list<T: PartialEq>(
    flag: &str,
    value: &str,
    mut item: impl FnMut(&str) -> Option<T>,
    into: &mut Vec<T>,
) -> Result<(), String> {
    for word in value.split(',').map(str::trim) {
        let parsed =
            item(word).ok_or_else(|| format!("{flag}: cannot read {word:?} in {value:?}"))?;
        if !into.contains(&parsed) {
            into.push(parsed);
        }
    }
    Ok(())
}

/// A count of at least 1.
pub fn count(flag: &str, value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(format!(
            "{flag} takes a number of at least 1, not {value:?}"
        )),
    }
}
