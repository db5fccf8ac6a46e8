//! A local cluster: one `larch-kv node` process per node on 127.0.0.1, each with a directory
//! and a log file under the cluster's directory. The fault test kills them with SIGKILL and
//! starts them again on the same directory and address; the benchmark and `larch-kv cluster`
//! use it as is.
//!
//! Nodes started here exit when this process goes (they watch their stdin, a pipe from it), so
//! an interrupted test or benchmark leaves no node behind.

use crate::client::Client;
use crate::node::{StoreKind, WriteResult};
use larch_raft::NodeId;
use openraft::{BasicNode, RaftMetrics};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running local cluster.
pub struct LocalCluster {
    exe: PathBuf,
    dir: PathBuf,
    store: StoreKind,
    members: BTreeMap<NodeId, Member>,
    http: reqwest::Client,
}

struct Member {
    addr: String,
    child: Option<Child>,
}

/// How long a node has to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A free port on 127.0.0.1 (the OS picks it; the node binds it right after).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("a free port: {e}"))
}

impl LocalCluster {
    /// Starts `n` nodes (ids 1..=n) of `exe` (the larch-kv binary) with their data under `dir`,
    /// and waits until each serves. Node i listens on `base_port + i - 1`, or on a free port
    /// when `base_port` is None (a cluster that is restarted on its directory needs the
    /// addresses its membership holds: a fixed base port). They are not yet a cluster unless
    /// they were before: `form` makes them one.
    pub async fn start(
        exe: &Path,
        dir: &Path,
        store: StoreKind,
        n: u64,
        base_port: Option<u16>,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cluster = LocalCluster {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            store,
            members: BTreeMap::new(),
            http: reqwest::Client::new(),
        };
        for id in 1..=n {
            let port = match base_port {
                Some(p) => u16::try_from(u64::from(p) + id - 1)
                    .map_err(|_| format!("no port {p} + {}", id - 1))?,
                None => free_port()?,
            };
            let addr = format!("127.0.0.1:{port}");
            cluster.members.insert(id, Member { addr, child: None });
            cluster.spawn(id)?;
        }
        for id in 1..=n {
            cluster.wait_serving(id).await?;
        }
        Ok(cluster)
    }

    /// Each node's address.
    pub fn addrs(&self) -> BTreeMap<NodeId, String> {
        self.members
            .iter()
            .map(|(id, m)| (*id, m.addr.clone()))
            .collect()
    }

    /// The process id of node `id`, while it runs.
    pub fn pid(&self, id: NodeId) -> Option<u32> {
        self.members.get(&id)?.child.as_ref().map(|c| c.id())
    }

    /// Node `id`'s data directory.
    pub fn node_dir(&self, id: NodeId) -> PathBuf {
        self.dir.join(format!("node{id}"))
    }

    fn spawn(&mut self, id: NodeId) -> Result<(), String> {
        let dir = self.node_dir(id);
        let log_path = self.dir.join(format!("node{id}.log"));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let m = self.members.get_mut(&id).ok_or(format!("no node {id}"))?;
        let child = Command::new(&self.exe)
            .arg("node")
            .arg(format!("--id={id}"))
            .arg(format!("--addr={}", m.addr))
            .arg(format!("--dir={}", dir.display()))
            .arg(format!("--store={}", self.store.name()))
            .arg("--exit-with-parent")
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.exe.display()))?;
        m.child = Some(child);
        Ok(())
    }

    /// Waits until node `id` answers, or says why it did not (its log's tail).
    async fn wait_serving(&mut self, id: NodeId) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if self.metrics(id).await.is_ok() {
                return Ok(());
            }
            let exited = match self.members.get_mut(&id).and_then(|m| m.child.as_mut()) {
                Some(c) => c.try_wait().map_err(|e| e.to_string())?,
                None => return Err(format!("node {id} is not running")),
            };
            if exited.is_some() || start.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "node {id} did not start ({}); its log:\n{}",
                    exited.map_or("timed out".to_string(), |s| s.to_string()),
                    self.log_tail(id)
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines of node `id`'s log.
    pub fn log_tail(&self, id: NodeId) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("node{id}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// `http://<node id's address><path>`.
    fn url(&self, id: NodeId, path: &str) -> Result<String, String> {
        let addr = &self.members.get(&id).ok_or(format!("no node {id}"))?.addr;
        Ok(format!("http://{addr}{path}"))
    }

    /// Sends `req` and decodes the node's JSON answer.
    async fn answer<A: DeserializeOwned>(req: reqwest::RequestBuilder) -> Result<A, String> {
        let resp = req.send().await.map_err(|e| e.to_string())?;
        resp.json().await.map_err(|e| e.to_string())
    }

    async fn get<A: DeserializeOwned>(&self, id: NodeId, path: &str) -> Result<A, String> {
        let req = self.http.get(self.url(id, path)?);
        Self::answer(req.timeout(Duration::from_secs(10))).await
    }

    async fn post<B: Serialize, A: DeserializeOwned>(
        &self,
        id: NodeId,
        path: &str,
        body: &B,
    ) -> Result<A, String> {
        let req = self.http.post(self.url(id, path)?).json(body);
        Self::answer(req.timeout(Duration::from_secs(60))).await
    }

    /// Node `id`'s openraft metrics.
    pub async fn metrics(&self, id: NodeId) -> Result<RaftMetrics<NodeId, BasicNode>, String> {
        self.get::<Result<_, String>>(id, "/admin/metrics").await?
    }

    /// Node `id`'s whole map.
    pub async fn dump(&self, id: NodeId) -> Result<Vec<(String, String)>, String> {
        self.get::<Result<_, String>>(id, "/api/dump").await?
    }

    /// Makes the nodes one cluster: node 1 initializes itself alone, adds the others as
    /// learners (each caught up before the next), then makes all of them voters. Nodes that
    /// already hold a membership (a cluster started again on its directory) are left as they
    /// are.
    pub async fn form(&self) -> Result<(), String> {
        let first = *self.members.keys().next().ok_or("no nodes")?;
        let formed = self.metrics(first).await?;
        if formed
            .membership_config
            .membership()
            .nodes()
            .next()
            .is_some()
        {
            self.wait_leader(Duration::from_secs(30)).await?;
            return Ok(());
        }
        let me = BTreeMap::from([(first, self.members[&first].addr.clone())]);
        let init: Result<
            (),
            openraft::error::RaftError<NodeId, openraft::error::InitializeError<NodeId, BasicNode>>,
        > = self.post(first, "/admin/init", &me).await?;
        init.map_err(|e| format!("initialize: {e}"))?;
        self.wait_leader(Duration::from_secs(30)).await?;
        for id in self.members.keys().skip(1) {
            self.add_learner(*id).await?;
        }
        self.change_members(self.members.keys().copied().collect())
            .await
    }

    /// Adds node `id` as a learner, through the leader; returns once it caught up.
    pub async fn add_learner(&self, id: NodeId) -> Result<(), String> {
        let leader = self.wait_leader(Duration::from_secs(30)).await?;
        let addr = self
            .members
            .get(&id)
            .ok_or(format!("no node {id}"))?
            .addr
            .clone();
        let added: WriteResult = self.post(leader, "/admin/learner", &(id, addr)).await?;
        added
            .map(|_| ())
            .map_err(|e| format!("add learner {id}: {e}"))
    }

    /// Makes `ids` the voters, through the leader (nodes left out are removed).
    pub async fn change_members(&self, ids: BTreeSet<NodeId>) -> Result<(), String> {
        let leader = self.wait_leader(Duration::from_secs(30)).await?;
        let changed: WriteResult = self.post(leader, "/admin/members", &ids).await?;
        changed
            .map(|_| ())
            .map_err(|e| format!("change membership to {ids:?}: {e}"))
    }

    /// The leader as the running nodes report it, once one is known to a node that runs.
    pub async fn wait_leader(&self, timeout: Duration) -> Result<NodeId, String> {
        let start = Instant::now();
        loop {
            for (id, m) in &self.members {
                if m.child.is_none() {
                    continue;
                }
                if let Ok(metrics) = self.metrics(*id).await {
                    if let Some(l) = metrics.current_leader {
                        if self.members.get(&l).is_some_and(|m| m.child.is_some()) {
                            return Ok(l);
                        }
                    }
                }
            }
            if start.elapsed() > timeout {
                return Err("no leader elected".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A client of this cluster.
    pub fn client(&self) -> Client {
        Client::new(&self.addrs())
    }

    /// Kills node `id` with SIGKILL (no shutdown of any kind) and reaps it.
    pub fn kill(&mut self, id: NodeId) -> Result<(), String> {
        let m = self.members.get_mut(&id).ok_or(format!("no node {id}"))?;
        if let Some(mut c) = m.child.take() {
            c.kill().map_err(|e| format!("kill node {id}: {e}"))?;
            c.wait().map_err(|e| format!("reap node {id}: {e}"))?;
        }
        Ok(())
    }

    /// Starts node `id` again on its directory and address, and waits until it serves.
    pub async fn restart(&mut self, id: NodeId) -> Result<(), String> {
        self.spawn(id)?;
        self.wait_serving(id).await
    }

    /// Stops every node: closes its stdin (the node shuts its Raft and its store down), and
    /// kills it if it has not exited within 10 s.
    pub fn stop(&mut self) {
        for m in self.members.values_mut() {
            if let Some(c) = m.child.as_mut() {
                drop(c.stdin.take());
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for m in self.members.values_mut() {
            if let Some(mut c) = m.child.take() {
                while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for m in self.members.values_mut() {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
