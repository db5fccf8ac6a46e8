//! Raft's RPCs between nodes: JSON over HTTP/1.1 with kept-alive connections (one reqwest
//! client per node, shared by its connections to every peer).

use larch_raft::{NodeId, TypeConfig};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Makes a node's connections to its peers.
#[derive(Clone)]
pub struct Network {
    http: reqwest::Client,
}

impl Network {
    pub fn new() -> Self {
        Network {
            http: reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .unwrap_or_default(),
        }
    }
}

impl Default for Network {
    fn default() -> Self {
        Self::new()
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            http: self.http.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

/// The way to one peer.
pub struct Connection {
    http: reqwest::Client,
    target: NodeId,
    addr: String,
}

impl Connection {
    /// Posts `req` to `path` and returns the peer's answer; a peer that cannot be reached is
    /// `Unreachable` (openraft backs off before it tries again), any other failure `Network`.
    async fn call<Req, Resp, E>(
        &self,
        path: &str,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let url = format!("http://{}{path}", self.addr);
        let sent = self
            .http
            .post(url)
            .timeout(option.hard_ttl())
            .json(req)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        let answer: Result<Resp, RaftError<NodeId, E>> = resp
            .json()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("/raft/snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/vote", &rpc, &option).await
    }
}
