//! A client of the cluster: writes go to the leader (it follows `ForwardToLeader` redirects and
//! tries the other nodes while one is down or an election runs), reads are linearizable.

use crate::node::{ReadResult, WriteResult};
use larch_raft::{NodeId, Request};
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why a client call gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// No node answered as leader before the deadline (the last failure it saw).
    Unavailable(String),
    /// The leader refused the request (the reason).
    Rejected(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Unavailable(e) => write!(f, "no leader answered in time: {e}"),
            ClientError::Rejected(e) => write!(f, "the cluster refused the request: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// A handle on the cluster, shared by any number of tasks.
pub struct Client {
    http: reqwest::Client,
    nodes: Vec<String>,
    /// The node believed to lead (an index into `nodes`, or an address learnt from a redirect).
    leader: Mutex<String>,
    /// How long one call keeps trying through failovers.
    patience: Duration,
}

/// One attempt's outcome.
enum Attempt<T> {
    Done(T),
    /// Try `Some(addr)` next, or the next node.
    Redirect(Option<String>),
    Failed(ClientError),
}

impl Client {
    /// A client of the nodes at `nodes` (id -> address), trying each call for up to 20 s.
    pub fn new(nodes: &BTreeMap<NodeId, String>) -> Self {
        let nodes: Vec<String> = nodes.values().cloned().collect();
        Client {
            http: reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .unwrap_or_default(),
            leader: Mutex::new(nodes.first().cloned().unwrap_or_default()),
            nodes,
            patience: Duration::from_secs(20),
        }
    }

    /// Applies `req` through the leader; returns once it is committed and applied there.
    pub async fn write(&self, req: &Request) -> Result<(), ClientError> {
        self.call("/api/write", req, |answer: WriteResult| match answer {
            Ok(_) => Attempt::Done(()),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => redirect(f),
            Err(e) => Attempt::Failed(ClientError::Rejected(e.to_string())),
        })
        .await
    }

    /// The value of `key`, linearizable: the leader confirms with a quorum that it leads.
    pub async fn read(&self, key: &str) -> Result<Option<String>, ClientError> {
        self.call("/api/read", &key, |answer: ReadResult| match answer {
            Ok(v) => Attempt::Done(v),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => redirect(f),
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e))) => {
                Attempt::Failed(ClientError::Unavailable(e.to_string()))
            }
            Err(e) => Attempt::Failed(ClientError::Rejected(e.to_string())),
        })
        .await
    }

    async fn call<B, A, T>(
        &self,
        path: &str,
        body: &B,
        judge: impl Fn(A) -> Attempt<T>,
    ) -> Result<T, ClientError>
    where
        B: Serialize + ?Sized,
        A: DeserializeOwned,
    {
        let deadline = Instant::now() + self.patience;
        let mut next = 0usize;
        let mut last: String;
        loop {
            let addr = self.leader.lock().map(|a| a.clone()).unwrap_or_default();
            match self.post::<B, A>(&addr, path, body).await {
                Ok(answer) => match judge(answer) {
                    Attempt::Done(v) => return Ok(v),
                    Attempt::Failed(ClientError::Rejected(e)) => {
                        return Err(ClientError::Rejected(e))
                    }
                    Attempt::Failed(ClientError::Unavailable(e)) => {
                        last = format!("{addr}: {e}");
                        self.move_on(None, &mut next);
                    }
                    Attempt::Redirect(to) => {
                        last = format!("{addr}: not the leader");
                        let known = to.is_some();
                        self.move_on(to, &mut next);
                        if known && Instant::now() < deadline {
                            continue;
                        }
                    }
                },
                Err(Failure::Refused(e)) => return Err(ClientError::Rejected(e)),
                Err(Failure::Transport(e)) => {
                    last = format!("{addr}: {e}");
                    self.move_on(None, &mut next);
                }
            }
            if Instant::now() >= deadline {
                return Err(ClientError::Unavailable(last));
            }
            // An election or a restart in progress: try again shortly.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Points the client at `to`, or at the next node in turn.
    fn move_on(&self, to: Option<String>, next: &mut usize) {
        let addr = to.unwrap_or_else(|| {
            *next = (*next + 1) % self.nodes.len().max(1);
            self.nodes.get(*next).cloned().unwrap_or_default()
        });
        if let Ok(mut l) = self.leader.lock() {
            *l = addr;
        }
    }

    async fn post<B: Serialize + ?Sized, A: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        body: &B,
    ) -> Result<A, Failure> {
        let resp = self
            .http
            .post(format!("http://{addr}{path}"))
            .timeout(Duration::from_secs(5))
            .json(body)
            .send()
            .await
            .map_err(Failure::Transport)?;
        let status = resp.status();
        if status.is_client_error() {
            let why = resp.text().await.unwrap_or_default();
            return Err(Failure::Refused(format!("{status}: {why}")));
        }
        resp.json().await.map_err(Failure::Transport)
    }
}

/// Why one request got no answer to judge.
enum Failure {
    /// The node refused the request itself (4xx): another node would too.
    Refused(String),
    /// No answer (the node is down, restarting, or slow): another node may answer.
    Transport(reqwest::Error),
}

fn redirect<T>(f: ForwardToLeader<NodeId, BasicNode>) -> Attempt<T> {
    Attempt::Redirect(f.leader_node.map(|n| n.addr))
}
