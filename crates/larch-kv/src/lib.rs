//! larch-kv: a replicated key-value service on openraft with Larch as each node's storage
//! (larch-raft), and what measures and tests it: a local cluster of node processes on
//! 127.0.0.1 (`cluster`), a client that follows the leader (`client`), the cluster benchmark
//! against the same store on RocksDB (`bench`, `peer_store`).
//!
//! Layers: `node` (a node's Raft, store and HTTP API) over `network` (Raft's RPCs to the
//! peers) and the stores (larch-raft's, `peer_store`); `client`; `cluster` (processes) over
//! `client`; `bench` over `cluster`. docs/design/raft.md describes the service.

pub mod bench;
pub mod client;
pub mod cluster;
pub mod network;
pub mod node;
pub mod peer_store;
