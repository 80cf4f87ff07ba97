//! Holds off a virtual machine's free page reporting for the length of a run.
//!
//! On a guest whose balloon device reports free pages to the host (virtio-balloon's free page
//! reporting, tuned by `page_reporting_order` in sysfs), a block of free memory of that order
//! goes back to the host about two seconds after the guest frees it, and whatever touches it
//! next waits for the host to fault every page in again. Page-cache writes are what touch it:
//! 512 MiB written with `dd` ran at 0.3-1.2 GB/s when it started three seconds after the
//! previous file's pages were freed, and at 5 GB/s when it started at once or with reporting
//! held off. A baseline then moved 6x between repetitions depending only on how long the phase
//! before it took. Raising the order past the largest block the buddy allocator keeps stops new
//! reports; memory reported before stays with the host until touched, so the run then touches
//! and frees some first (the first repetition of a run that followed another wrote at a fifth
//! of the speed of the others without it). The guard puts the previous order back when the run
//! ends.

use std::path::Path;

/// The kernel's knob: free blocks of this order or larger are reported to the host.
const ORDER_PARAM: &str = "/sys/module/page_reporting/parameters/page_reporting_order";

/// The number of block orders the buddy allocator keeps (the columns of a `/proc/buddyinfo`
/// line after the zone's name): orders `0..n`, so order `n` is never reported.
pub fn block_orders(buddyinfo: &str) -> Option<u32> {
    let line = buddyinfo.lines().find(|l| l.contains("zone"))?;
    let counts = line.split("zone").nth(1)?.split_whitespace().skip(1);
    let n = counts.take_while(|c| c.parse::<u64>().is_ok()).count();
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// The most memory a run brings back from the host before it starts.
const MAX_BROUGHT_BACK: u64 = 4 << 30;

/// Touches `bytes` of memory and frees them: the host faults them in once, here, and with
/// reporting held off they stay with the guest, first on its free lists for the page cache.
fn bring_back(bytes: u64) {
    let Ok(len) = usize::try_from(bytes) else {
        return;
    };
    let touched = vec![0x5au8; len];
    std::hint::black_box(&touched);
}

/// Free page reporting held off until dropped.
#[derive(Debug)]
pub struct Held {
    previous: u32,
    now: u32,
}

impl Held {
    /// What the run's record says of it.
    pub fn describe(&self) -> String {
        format!(
            "free page reporting held off for the run (page_reporting_order {} -> {})",
            self.previous, self.now
        )
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(ORDER_PARAM, self.previous.to_string()) {
            eprintln!(
                "note: could not put page_reporting_order back to {} ({e}); write it to {ORDER_PARAM}",
                self.previous
            );
        }
    }
}

/// Holds off free page reporting if this machine reports free pages and lets us change that;
/// `None` otherwise (a machine without a balloon device, or a run without root).
pub fn hold_off() -> Option<Held> {
    if !Path::new(ORDER_PARAM).exists() {
        return None;
    }
    let previous: u32 = std::fs::read_to_string(ORDER_PARAM)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let orders = block_orders(&std::fs::read_to_string("/proc/buddyinfo").ok()?)?;
    if previous >= orders {
        return None;
    }
    std::fs::write(ORDER_PARAM, orders.to_string()).ok()?;
    bring_back(crate::fits::available_memory().map_or(0, |a| (a / 4).min(MAX_BROUGHT_BACK)));
    Some(Held {
        previous,
        now: orders,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_orders_of_a_buddyinfo_line() {
        let text = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      2 \n\
                    Node 0, zone    DMA32    5  4  3  2  1  1  1  1  1  1  900 \n";
        assert_eq!(block_orders(text), Some(11));
        assert_eq!(
            block_orders("Node 0, zone   Normal   2270   4432   4783\n"),
            Some(3)
        );
    }

    #[test]
    fn refuses_text_without_a_zone() {
        assert_eq!(block_orders(""), None);
        assert_eq!(block_orders("Node 0, zone Normal\n"), None);
        assert_eq!(block_orders("garbage 1 2 3\n"), None);
    }
}
