//! A model of where a checkpoint's new leaves go in the data file, and what the device pays
//! for them: the lowest free pages (as built), against whole free segments filled in order,
//! with the sparsest segments cleaned (their live leaves moved) to make segments free. No
//! engine code: leaves as page ids, records as counts (docs/design/performance.md, "1 KB
//! updates are the device's requests").
//!
//! A table of `N` records, `C` to a leaf, in `L = N / C` leaves cut into `K` slices of
//! consecutive leaves (the overlay's slices). Updates pick a record by a scrambled Zipfian
//! (YCSB's `zipf`, theta 0.99) or uniformly (`uniform`); every `M` updates a checkpoint merges
//! the slice whose records are oldest (the log's room calls for it: round robin), rewriting
//! each of the slice's leaves that an update reached since its last merge. Every checkpoint
//! is durable: the pages it frees are reusable once the next one is written.
//!
//! The file holds `L * space` pages and grows only when no page at all is free. Policies:
//! - `lowest`: each new leaf takes the lowest free page (as built);
//! - `segments`: the file in segments of `S` pages; new leaves fill the wholly free segments
//!   in order (the lowest free page once none is left); then the segments with the fewest
//!   live leaves are cleaned (greedy): their live leaves are rewritten by the same checkpoint
//!   into what is left of the open segments, until enough segments hold no live leaf for the
//!   next two checkpoints (their pages free once this one is durable), moving at most
//!   `CLEAN_MAX` leaves for each new one.
//!
//! Printed per workload and space: pages written a checkpoint (and of them moved by
//! cleaning), the device's write requests a checkpoint (each maximal run of consecutive
//! pages, at most 32 pages, is one), and the device's time a checkpoint by this VM's costs
//! (fio, random writes, queue depth 32: about 50K requests a second up to 16 KiB, 1.25 GB/s
//! beyond: a request costs max(20 us, 3.2 us a page)).
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin segment_cleaning [N] [C] [M] [K]

use rand::{Rng, SeedableRng};

const SEGMENT: usize = 32;
const REQUEST_PAGES_MAX: usize = 32;
const CHECKPOINTS: usize = 1500;
const WARMUP: usize = 1000;
/// Leaves a checkpoint's cleaning moves at most, for each new leaf it writes.
const CLEAN_MAX: usize = 2;

/// YCSB's scrambled Zipfian over `n` items (Gray et al.'s generator, theta 0.99), each rank
/// mapped to an item by a hash so that hot items lie anywhere in the key space.
struct Zipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    fn new(n: u64) -> Zipf {
        let theta = 0.99;
        let zeta = |k: u64| (1..=k).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2);
        let n = n as f64;
        Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        let rank = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            (self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        // FNV-1a of the rank, as YCSB scrambles.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in rank.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h % self.n as u64
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Lowest,
    Segments,
}

struct File {
    /// Page -> leaf living there.
    owner: Vec<Option<u32>>,
    /// Pages free to reuse.
    free: Vec<bool>,
    /// Leaf -> its page.
    at: Vec<usize>,
    /// Pages freed by the last checkpoint: free once the next is written.
    pending: Vec<usize>,
    /// Live leaves in each segment.
    live: Vec<u32>,
    /// Pages a checkpoint writes, on average (`Segments`' reserve), and moved by the last.
    written_avg: usize,
    moved_last: usize,
}

impl File {
    fn new(leaves: usize, pages: usize) -> File {
        let mut f = File {
            owner: vec![None; pages],
            free: vec![true; pages],
            at: vec![0; leaves],
            pending: Vec::new(),
            live: vec![0; pages.div_ceil(SEGMENT)],
            written_avg: 0,
            moved_last: 0,
        };
        // A load leaves the leaves in key order at the front.
        for leaf in 0..leaves {
            f.place(leaf as u32, leaf);
        }
        f
    }

    /// A segment more at the file's end (the file was full).
    fn grow(&mut self) {
        let at = self.free.len();
        let end = (at / SEGMENT + 1) * SEGMENT;
        self.owner.resize(end, None);
        self.free.resize(end, true);
        self.live.resize(end / SEGMENT, 0);
    }

    fn place(&mut self, leaf: u32, page: usize) {
        self.owner[page] = Some(leaf);
        self.free[page] = false;
        self.at[leaf as usize] = page;
        self.live[page / SEGMENT] += 1;
    }

    fn vacate(&mut self, leaf: u32) {
        let page = self.at[leaf as usize];
        self.owner[page] = None;
        self.live[page / SEGMENT] -= 1;
        self.pending.push(page);
    }

    /// Whether every page of segment `s` is free now.
    fn segment_free(&self, s: usize) -> bool {
        let end = ((s + 1) * SEGMENT).min(self.free.len());
        (s * SEGMENT..end).all(|p| self.free[p])
    }

    /// Writes new copies of `leaves` (a checkpoint), returning the pages written.
    fn checkpoint(&mut self, leaves: &[u32], policy: Policy) -> Vec<usize> {
        let settled = std::mem::take(&mut self.pending);
        for p in settled {
            self.free[p] = true;
        }
        let mut written = Vec::with_capacity(leaves.len() * 2);
        match policy {
            Policy::Lowest => {
                let mut cursor = 0;
                for &leaf in leaves {
                    while cursor < self.free.len() && !self.free[cursor] {
                        cursor += 1;
                    }
                    if cursor == self.free.len() {
                        self.grow();
                    }
                    self.vacate(leaf);
                    self.place(leaf, cursor);
                    written.push(cursor);
                }
            }
            Policy::Segments => {
                // New leaves fill the wholly free segments in order (the lowest free page
                // where none is left); then the sparsest segments are cleaned, their live
                // leaves moved into the open segments, until enough segments hold no live
                // leaf for the next two checkpoints (their pages free once this one is
                // durable).
                let open: Vec<usize> = (0..self.live.len())
                    .filter(|&s| self.segment_free(s))
                    .flat_map(|s| s * SEGMENT..((s + 1) * SEGMENT).min(self.free.len()))
                    .collect();
                let mut next = 0;
                let mut fallback = 0;
                let mut victims = vec![false; self.live.len()];
                let mut take = |file: &mut File, victims: &[bool]| -> usize {
                    if next < open.len() {
                        next += 1;
                        return open[next - 1];
                    }
                    // The lowest free page outside the segments being emptied, else inside
                    // them; the file grows only when no page is free at all.
                    let outside = (fallback..file.free.len())
                        .find(|&p| file.free[p] && victims.get(p / SEGMENT) != Some(&true));
                    let page =
                        match outside.or_else(|| (0..file.free.len()).find(|&p| file.free[p])) {
                            Some(p) => p,
                            None => {
                                file.grow();
                                file.free
                                    .iter()
                                    .position(|&f| f)
                                    .unwrap_or(file.free.len() - 1)
                            }
                        };
                    if outside.is_some() {
                        fallback = page;
                    }
                    file.free[page] = false;
                    page
                };
                for &leaf in leaves {
                    let page = take(self, &victims);
                    self.vacate(leaf);
                    self.place(leaf, page);
                    written.push(page);
                }
                let fresh: std::collections::HashSet<usize> =
                    written.iter().map(|p| p / SEGMENT).collect();
                self.written_avg =
                    (self.written_avg * 7 + written.len().max(self.moved_last + leaves.len())) / 8;
                let reserve = 2 * self.written_avg.div_ceil(SEGMENT) + 1;
                let before = written.len();
                loop {
                    let empty = self.live.iter().filter(|&&l| l == 0).count();
                    if empty >= reserve || written.len() - before >= CLEAN_MAX * leaves.len() {
                        break;
                    }
                    let victim = (0..self.live.len())
                        .filter(|s| {
                            self.live[*s] > 0
                                && !fresh.contains(s)
                                && victims.get(*s) != Some(&true)
                        })
                        .min_by_key(|&s| self.live[s]);
                    let Some(v) = victim else { break };
                    victims.resize(self.live.len(), false);
                    victims[v] = true;
                    let live: Vec<u32> = (v * SEGMENT..((v + 1) * SEGMENT).min(self.owner.len()))
                        .filter_map(|p| self.owner[p])
                        .collect();
                    for leaf in live {
                        let page = take(self, &victims);
                        self.vacate(leaf);
                        self.place(leaf, page);
                        written.push(page);
                    }
                }
                self.moved_last = written.len() - before;
            }
        }
        written
    }
}

/// Device requests for `pages` written: maximal runs of consecutive pages, at most
/// `REQUEST_PAGES_MAX` each; and the device's time for them (microseconds).
fn requests(pages: &mut [usize]) -> (usize, f64) {
    pages.sort_unstable();
    let (mut n, mut time, mut run) = (0, 0.0, 0usize);
    let flush = |run: usize, n: &mut usize, time: &mut f64| {
        if run > 0 {
            *n += 1;
            *time += f64::max(20.0, 3.2 * run as f64);
        }
    };
    for i in 0..pages.len() {
        if run > 0 && (pages[i] != pages[i - 1] + 1 || run == REQUEST_PAGES_MAX) {
            flush(run, &mut n, &mut time);
            run = 0;
        }
        run += 1;
    }
    flush(run, &mut n, &mut time);
    (n, time)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(200_000, |a| a.parse().expect("N"));
    let per_leaf: u64 = args.next().map_or(3, |a| a.parse().expect("C"));
    let per_checkpoint: usize = args.next().map_or(1_600, |a| a.parse().expect("M"));
    let slices: usize = args.next().map_or(16, |a| a.parse().expect("K"));
    let leaves = n.div_ceil(per_leaf) as usize;
    println!(
        "{n} records, {per_leaf} a leaf ({leaves} leaves), {slices} slices, a checkpoint every \
         {per_checkpoint} updates; segments of {SEGMENT} pages; {CHECKPOINTS} checkpoints after \
         {WARMUP}\n"
    );
    println!(
        "| workload | space | policy | leaves a checkpoint | pages written | of them moved | requests | pages a request | device ms a checkpoint | device us an update | file / leaves at the end |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let zipf = Zipf::new(n);
    for workload in ["zipf", "uniform"] {
        for space in [1.05, 1.1, 1.2, 1.3, 1.5] {
            for policy in [Policy::Lowest, Policy::Segments] {
                let mut rng = rand::rngs::StdRng::seed_from_u64(7);
                let pages = (leaves as f64 * space) as usize;
                let mut file = File::new(leaves, pages);
                let slice_of = |leaf: usize| leaf * slices / leaves;
                let mut touched: Vec<Vec<bool>> = vec![vec![false; leaves]; slices];
                let mut next_slice = 0;
                let (mut sum_leaves, mut sum_written, mut sum_moved) = (0usize, 0usize, 0usize);
                let (mut sum_requests, mut sum_time) = (0usize, 0.0f64);
                for c in 0..WARMUP + CHECKPOINTS {
                    for _ in 0..per_checkpoint {
                        let record = if workload == "zipf" {
                            zipf.next(&mut rng)
                        } else {
                            rng.gen_range(0..n)
                        };
                        let leaf = (record / per_leaf) as usize;
                        touched[slice_of(leaf)][leaf] = true;
                    }
                    let s = next_slice;
                    next_slice = (next_slice + 1) % slices;
                    let lo = (s * leaves).div_ceil(slices);
                    let hi = ((s + 1) * leaves).div_ceil(slices);
                    let set: Vec<u32> = (lo..hi)
                        .filter(|&l| std::mem::take(&mut touched[s][l]))
                        .map(|l| l as u32)
                        .collect();
                    let mut written = file.checkpoint(&set, policy);
                    if c >= WARMUP {
                        sum_leaves += set.len();
                        sum_written += written.len();
                        sum_moved += written.len() - set.len();
                        let (r, t) = requests(&mut written);
                        sum_requests += r;
                        sum_time += t;
                    }
                }
                let k = CHECKPOINTS as f64;
                println!(
                    "| {workload} | {space} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} |",
                    if policy == Policy::Lowest { "lowest free page" } else { "segments, cleaned" },
                    sum_leaves as f64 / k,
                    sum_written as f64 / k,
                    sum_moved as f64 / k,
                    sum_requests as f64 / k,
                    sum_written as f64 / sum_requests.max(1) as f64,
                    sum_time / k / 1000.0,
                    sum_time / (k * per_checkpoint as f64),
                    file.free.len() as f64 / leaves as f64,
                );
            }
        }
    }
}
