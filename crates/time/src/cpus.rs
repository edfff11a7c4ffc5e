//! CPU lists in the kernel's form (`0-3,5`): one parser and one formatter for every crate (flags,
//! plan files, sysfs and /proc files).

/// CPUs Linux can address in an affinity mask (`CPU_SETSIZE`).
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Parse a CPU list in the kernel's format (`0-3,5,7-8`). Duplicates are removed; order is ascending.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    let s = s.trim();
    if s.is_empty() {
        return Err("empty CPU list; write e.g. 0-3,5".into());
    }
    for part in s.split(',') {
        let part = part.trim();
        let bad = || format!("'{part}' in CPU list '{s}' is not a CPU number or range like 2-5");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b {
                    return Err(format!(
                        "range '{part}' in CPU list runs backwards; write {b}-{a}"
                    ));
                }
                if b >= MAX_CPUS {
                    return Err(format!(
                        "CPU {b} is beyond the {} CPUs Linux can address",
                        MAX_CPUS
                    ));
                }
                out.extend(a..=b);
            }
            None => {
                let c: usize = part.parse().map_err(|_| bad())?;
                if c >= MAX_CPUS {
                    return Err(format!(
                        "CPU {c} is beyond the {} CPUs Linux can address",
                        MAX_CPUS
                    ));
                }
                out.push(c);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Format CPUs in the kernel's compact list form.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_format_back() {
        assert_eq!(
            parse_cpu_list("0-3,5, 7-8").unwrap(),
            vec![0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(parse_cpu_list("3,1,1").unwrap(), vec![1, 3]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert!(parse_cpu_list("").unwrap_err().contains("empty"));
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("x").unwrap_err().contains("not a CPU"));
        assert!(parse_cpu_list("0-99999").unwrap_err().contains("beyond"));
    }
}
