//! This process's tasks and its descendant processes, from /proc: what the watchdog demotes and
//! the share watch samples.

/// The task (thread) ids of process `pid`; none when it is gone.
pub(crate) fn tasks_of(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Every descendant process of `root` (children, their children...).
pub fn descendants(root: i32) -> Vec<i32> {
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    if let Ok(d) = std::fs::read_dir("/proc") {
        for e in d.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(ppid) = punctual_rt::parent_pid(pid) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// Every descendant process of `root` from the kernel's `children` lists (each task's children,
/// CONFIG_PROC_CHILDREN), which costs a few reads instead of a scan of /proc; the scan when the lists
/// are missing.
pub fn descendants_fast(root: i32) -> Vec<i32> {
    if !std::path::Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        return descendants(root);
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for t in tasks_of(p) {
            let Ok(list) = std::fs::read_to_string(format!("/proc/{p}/task/{t}/children")) else {
                continue;
            };
            for c in list
                .split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if !out.contains(&c) {
                    out.push(c);
                    frontier.push(c);
                }
            }
        }
    }
    out
}
