//! One node: its Raft, its store, and the HTTP API its peers and clients call.
//!
//! ```text
//! POST /raft/append   /raft/vote   /raft/snapshot     Raft's RPCs between the nodes
//! POST /api/write     {"Set":{"key":..,"value":..}} or {"Delete":{"key":..}}: through the leader
//! POST /api/read      "key": linearizable (the leader confirms it leads, then reads what it applied)
//! POST /api/local     "key": this node's copy, no Raft round (may be stale)
//! GET  /api/dump      this node's whole map, in key order
//! POST /admin/init    {"1":"127.0.0.1:21001",..}: the first membership (once, on one node)
//! POST /admin/learner [2,"127.0.0.1:21002"]: adds a learner (waits until it caught up)
//! POST /admin/members [1,2,3]: makes these the voters
//! GET  /admin/metrics openraft's metrics of this node
//! ```
//!
//! Every answer the node's Raft gives is 200 with a JSON `Result` (`{"Ok":..}` or `{"Err":..}`,
//! openraft's own error types), so that a client tells a redirect to the leader
//! (`ForwardToLeader`) from a failure. A request the service refuses before Raft sees it is a
//! 4xx with a sentence: a key over `KEY_BYTES_MAX` (400), a body over `BODY_BYTES_MAX` (413),
//! a body that is not the JSON asked for (400, 415 or 422, axum's).

// openraft's `StorageError` (over 200 bytes) is what the stores return.
#![allow(clippy::result_large_err)]

use crate::network::Network;
use crate::peer_store::{PeerLogStore, PeerStateMachine};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use larch_raft::{NodeId, Request, TypeConfig};
use openraft::error::{
    CheckIsLeaderError, ClientWriteError, InitializeError, InstallSnapshotError, RaftError,
};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, ClientWriteResponse, InstallSnapshotRequest,
    InstallSnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{BasicNode, Config, Raft, RaftMetrics, StorageError};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Which engine holds a node's log and state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// larch-raft's store on a Larch database.
    Larch,
    /// The same schema on RocksDB (larch-bench's adapter, librocksdb).
    Rocksdb,
}

impl StoreKind {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "larch" => Ok(StoreKind::Larch),
            "rocksdb" => Ok(StoreKind::Rocksdb),
            _ => Err(format!("unknown store {s:?} (larch or rocksdb)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Larch => "larch",
            StoreKind::Rocksdb => "rocksdb",
        }
    }
}

/// How a node reads its copy of the map.
pub enum Reader {
    Larch(larch_raft::StateMachineStore),
    Peer(PeerStateMachine),
}

type StorageResult<T> = Result<T, StorageError<NodeId>>;

impl Reader {
    pub fn get(&self, key: &str) -> StorageResult<Option<String>> {
        match self {
            Reader::Larch(s) => s.get(key),
            Reader::Peer(s) => s.get(key),
        }
    }

    pub fn entries(&self) -> StorageResult<Vec<(String, String)>> {
        match self {
            Reader::Larch(s) => s.entries(),
            Reader::Peer(s) => s.entries(),
        }
    }
}

/// The Raft timing of the service: elections after 1-2 s without a heartbeat (a loaded
/// 2-core machine stalls a node for hundreds of milliseconds; openraft's 150-300 ms default
/// would call elections the leader never lost), a heartbeat every 200 ms.
pub fn raft_config() -> Result<Arc<Config>, String> {
    let config = Config {
        cluster_name: "larch-kv".into(),
        heartbeat_interval: 200,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        ..Default::default()
    };
    config
        .validate()
        .map(Arc::new)
        .map_err(|e| format!("raft config: {e}"))
}

/// A running node.
pub struct Node {
    pub id: NodeId,
    pub raft: Raft<TypeConfig>,
    pub reader: Reader,
    /// A description of the store (engine and configuration), for the log.
    pub store: String,
}

/// Opens the store at `dir` and starts the node's Raft (not yet serving).
pub async fn start(id: NodeId, dir: &Path, kind: StoreKind) -> Result<Node, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    claim(id, dir, kind)?;
    match kind {
        StoreKind::Larch => {
            let path = dir.join("node.larch");
            let (log, sm) =
                larch_raft::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Node {
                id,
                raft: raft_on(id, log, sm.clone()).await?,
                reader: Reader::Larch(sm),
                store: format!(
                    "larch {} (larch-raft, {})",
                    env!("CARGO_PKG_VERSION"),
                    path.display()
                ),
            })
        }
        StoreKind::Rocksdb => {
            let (engine, described) = open_peer("rocksdb", &dir.join("rocksdb"))?;
            let (log, sm): (PeerLogStore, PeerStateMachine) =
                crate::peer_store::open(engine).map_err(|e| format!("store: {e}"))?;
            Ok(Node {
                id,
                raft: raft_on(id, log, sm.clone()).await?,
                reader: Reader::Peer(sm),
                store: described,
            })
        }
    }
}

/// Node `id`'s Raft on `log` and `sm`, with the service's timing and transport.
async fn raft_on<LS, SM>(id: NodeId, log: LS, sm: SM) -> Result<Raft<TypeConfig>, String>
where
    LS: RaftLogStorage<TypeConfig>,
    SM: RaftStateMachine<TypeConfig>,
{
    Raft::new(id, raft_config()?, Network::new(), log, sm)
        .await
        .map_err(|e| format!("raft: {e}"))
}

/// Refuses a directory that holds another node's state, or this node's in the other store: a
/// node that started empty under an id that voted and acknowledged entries before could undo
/// them. The first start writes `node-id` (the id and the store) into the directory.
fn claim(id: NodeId, dir: &Path, kind: StoreKind) -> Result<(), String> {
    let path = dir.join("node-id");
    let mine = format!("{id} {}\n", kind.name());
    match std::fs::read_to_string(&path) {
        Ok(found) if found == mine => Ok(()),
        Ok(found) => Err(format!(
            "{} holds node {:?}; this is node {id} with the {} store",
            dir.display(),
            found.trim(),
            kind.name()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if dir.join("node.larch").exists() || dir.join("rocksdb").exists() {
                return Err(format!(
                    "{} holds a store but no node-id: not starting node {id} on it",
                    dir.display()
                ));
            }
            // Written and synced before the store exists: a crash between leaves an id and no
            // store, which the next start accepts.
            let tmp = dir.join("node-id.tmp");
            let write = || -> std::io::Result<()> {
                let mut f = std::fs::File::create(&tmp)?;
                std::io::Write::write_all(&mut f, mine.as_bytes())?;
                f.sync_all()?;
                std::fs::rename(&tmp, &path)?;
                std::fs::File::open(dir)?.sync_all()
            };
            write().map_err(|e| format!("{}: {e}", path.display()))
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Opens a larch-bench engine at `dir` for a node: its durable-write configuration (WAL on,
/// synced batches), a 64 MiB cache.
fn open_peer(
    name: &str,
    dir: &Path,
) -> Result<(Arc<dyn larch_bench::engines::Engine>, String), String> {
    let spec = larch_bench::engines::find(name).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let opened = (spec.open)(&larch_bench::engines::OpenOptions {
        dir: PathBuf::from(dir),
        cache_bytes: 64 << 20,
        sync: true,
        num: 1_000_000,
        key_size: 16,
        value_size: 100,
        threads_max: 4,
        memory_limit: None,
        bloom_bits: 10,
        background_nice: 0,
        checkpoint_slices: 0,
        checkpoint_bytes: 0,
        log_room_bytes: 0,
        memory_budget: 0,
        frames_bytes: 0,
    })
    .map_err(|e| format!("{name}: {e}"))?;
    let described = format!(
        "{name} {} ({})",
        opened.version,
        larch_bench::engines::describe(&opened.config)
    );
    Ok((Arc::from(opened.engine), described))
}

/// Serves `node` on `listener` until `shutdown` resolves, then stops its Raft.
pub async fn serve(
    node: Node,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let node = Arc::new(node);
    let raft = Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .layer(DefaultBodyLimit::max(RAFT_BODY_BYTES_MAX));
    let app = Router::new()
        .route("/api/write", post(write))
        .route("/api/read", post(read))
        .route("/api/local", post(local))
        .route("/api/dump", get(dump))
        .route("/admin/init", post(init))
        .route("/admin/learner", post(add_learner))
        .route("/admin/members", post(change_members))
        .route("/admin/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .merge(raft)
        .with_state(node.clone());
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| format!("http: {e}"));
    let stopped = tokio::time::timeout(Duration::from_secs(5), node.raft.shutdown()).await;
    served?;
    match stopped {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("raft shutdown: {e}")),
        Err(_) => Err("raft shutdown: timed out".into()),
    }
}

type Shared = State<Arc<Node>>;

async fn append(
    State(n): Shared,
    Json(rpc): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> {
    Json(n.raft.append_entries(rpc).await)
}

async fn vote(
    State(n): Shared,
    Json(rpc): Json<VoteRequest<NodeId>>,
) -> Json<Result<VoteResponse<NodeId>, RaftError<NodeId>>> {
    Json(n.raft.vote(rpc).await)
}

async fn snapshot(
    State(n): Shared,
    Json(rpc): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    Json(n.raft.install_snapshot(rpc).await)
}

/// What a client write answers.
pub type WriteResult =
    Result<ClientWriteResponse<TypeConfig>, RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>>;
/// What a linearizable read answers.
pub type ReadResult =
    Result<Option<String>, RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>>;

/// The longest key a client may write: Larch's at its default page size (1000 bytes). A
/// write the state machine could not apply would stop every node at that entry, so the
/// service refuses it before it enters the log.
pub const KEY_BYTES_MAX: usize =
    larchdb::limits::key_bytes_max(larchdb::limits::PAGE_BYTES_DEFAULT);
/// The largest request a client may send (so the largest value, less the JSON around it):
/// every write is a log entry, replicated whole to every node.
pub const BODY_BYTES_MAX: usize = 2 << 20;
/// The largest Raft RPC a node accepts: a batch of entries (openraft sends up to 300) or a
/// snapshot chunk (3 MiB of data, as JSON numbers). The peers are the cluster's own nodes.
pub const RAFT_BODY_BYTES_MAX: usize = 1 << 30;

/// A request the service refuses, as 400 and a sentence.
type Refused = (StatusCode, String);

fn check_key(key: &str) -> Result<(), Refused> {
    if key.len() > KEY_BYTES_MAX {
        return Err((
            StatusCode::BAD_REQUEST,
            format!("key of {} bytes: the most is {KEY_BYTES_MAX}", key.len()),
        ));
    }
    Ok(())
}

async fn write(State(n): Shared, Json(req): Json<Request>) -> Result<Json<WriteResult>, Refused> {
    match &req {
        Request::Set { key, .. } | Request::Delete { key } => check_key(key)?,
    }
    Ok(Json(n.raft.client_write(req).await))
}

async fn read(State(n): Shared, Json(key): Json<String>) -> Result<Json<ReadResult>, Refused> {
    check_key(&key)?;
    // The leader confirms with a quorum that it still leads and waits until it applied that
    // point; what it then reads is linearizable.
    let answer = match n.raft.ensure_linearizable().await {
        Ok(_) => n
            .reader
            .get(&key)
            .map_err(|e| RaftError::Fatal(openraft::error::Fatal::StorageError(e))),
        Err(e) => Err(e),
    };
    Ok(Json(answer))
}

async fn local(
    State(n): Shared,
    Json(key): Json<String>,
) -> Result<Json<Result<Option<String>, String>>, Refused> {
    check_key(&key)?;
    Ok(Json(n.reader.get(&key).map_err(|e| e.to_string())))
}

async fn dump(State(n): Shared) -> Json<Result<Vec<(String, String)>, String>> {
    Json(n.reader.entries().map_err(|e| e.to_string()))
}

async fn init(
    State(n): Shared,
    Json(members): Json<BTreeMap<NodeId, String>>,
) -> Json<Result<(), RaftError<NodeId, InitializeError<NodeId, BasicNode>>>> {
    let nodes: BTreeMap<NodeId, BasicNode> = members
        .into_iter()
        .map(|(id, addr)| (id, BasicNode { addr }))
        .collect();
    Json(n.raft.initialize(nodes).await)
}

async fn add_learner(
    State(n): Shared,
    Json((id, addr)): Json<(NodeId, String)>,
) -> Json<WriteResult> {
    Json(n.raft.add_learner(id, BasicNode { addr }, true).await)
}

async fn change_members(State(n): Shared, Json(ids): Json<BTreeSet<NodeId>>) -> Json<WriteResult> {
    Json(n.raft.change_membership(ids, false).await)
}

async fn metrics(State(n): Shared) -> Json<Result<RaftMetrics<NodeId, BasicNode>, String>> {
    Json(Ok(n.raft.metrics().borrow().clone()))
}
