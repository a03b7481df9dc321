//! The `api-int:22623` load balancer of the multi-replica tests: a round-robin TCP proxy that
//! keeps the client's address, as a cloud network load balancer does. Each machine connects
//! from its own loopback address (127.10.x.y) and the proxy binds its upstream socket to that
//! same address before connecting to the replica it chose, so the replica sees the machine's
//! address. The proxy remembers which replica it sent each connection to, and a replica that
//! was restarted on new ports is put back in its slot ([`Balancer::set_upstream`]).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

use serde_json::Value;

use crate::mcs;

/// What a current Ignition sends: spec 3.5 preferred.
pub const IGNITION_3_5: &str = "application/vnd.coreos.ignition+json;version=3.5.0";

/// A running round-robin proxy (it runs until its runtime stops).
pub struct Balancer {
    pub address: SocketAddr,
    /// Replica slots; `None` while a replica is out of rotation (restarting).
    upstreams: Arc<Mutex<Vec<Option<SocketAddr>>>>,
    choices: Arc<Mutex<Vec<(IpAddr, usize)>>>,
}

impl Balancer {
    /// A proxy over `upstreams` that connects from the client's own address.
    pub async fn start(upstreams: Vec<SocketAddr>) -> Balancer {
        Balancer::start_from(upstreams, None).await
    }

    /// [`Balancer::start`], but connecting upstream from `nat` (when given) instead of the
    /// client's address, as a NAT or a load balancer that rewrites source addresses.
    pub async fn start_from(upstreams: Vec<SocketAddr>, nat: Option<IpAddr>) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let upstreams = Arc::new(Mutex::new(
            upstreams.into_iter().map(Some).collect::<Vec<_>>(),
        ));
        let choices = Arc::new(Mutex::new(Vec::new()));
        let (shared_upstreams, shared_choices) = (upstreams.clone(), choices.clone());
        tokio::spawn(async move {
            let mut next = 0usize;
            loop {
                let Ok((mut client, peer)) = listener.accept().await else {
                    return;
                };
                // Round robin over the slots in rotation.
                let (chosen, upstream) = {
                    let upstreams = shared_upstreams.lock().unwrap();
                    let Some((chosen, upstream)) = (0..upstreams.len())
                        .map(|k| (next + k) % upstreams.len())
                        .find_map(|slot| Some((slot, upstreams[slot]?)))
                    else {
                        continue;
                    };
                    next = chosen + 1;
                    (chosen, upstream)
                };
                shared_choices.lock().unwrap().push((peer.ip(), chosen));
                tokio::spawn(async move {
                    let socket = TcpSocket::new_v4().unwrap();
                    socket
                        .bind(SocketAddr::new(nat.unwrap_or(peer.ip()), 0))
                        .unwrap();
                    let Ok(mut server) = socket.connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        Balancer {
            address,
            upstreams,
            choices,
        }
    }

    /// Replica `slot` now listens on `address` (it was restarted), and is in rotation.
    pub fn set_upstream(&self, slot: usize, address: SocketAddr) {
        self.upstreams.lock().unwrap()[slot] = Some(address);
    }

    /// Takes replica `slot` out of rotation, as a load balancer does once its health check
    /// fails (before a planned restart).
    pub fn remove_upstream(&self, slot: usize) {
        self.upstreams.lock().unwrap()[slot] = None;
    }

    /// Every (client address, replica slot) in the order the connections came.
    pub fn choices(&self) -> Vec<(IpAddr, usize)> {
        self.choices.lock().unwrap().clone()
    }

    /// The replica slot the last connection from `client` went to.
    pub fn last_choice(&self, client: IpAddr) -> Option<usize> {
        self.choices
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(ip, _)| *ip == client)
            .map(|(_, slot)| *slot)
    }
}

/// `GET /config/worker` on `to` (the balancer or a replica), connecting from `from`, as
/// Ignition asks (spec 3.5). A transport failure (the replica died) is an error.
pub async fn fetch_config(to: SocketAddr, from: IpAddr) -> io::Result<mcs::Response> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    let mut stream = socket.connect(to).await?;
    stream
        .write_all(&mcs::request_bytes(
            "GET",
            "/config/worker",
            &[("Accept", IGNITION_3_5)],
        ))
        .await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    mcs::parse_response(&raw, false)
}

/// What Ignition does: [`fetch_config`] until a 200, retrying transport errors and 5xx (every
/// 200 ms here; Ignition backs off from 200 ms to 5 s) until `deadline`. Returns the answer and
/// how many attempts failed before it.
pub async fn fetch_like_ignition(
    to: SocketAddr,
    from: IpAddr,
    deadline: Duration,
) -> (mcs::Response, usize) {
    let give_up = Instant::now() + deadline;
    let mut failed = 0;
    loop {
        match fetch_config(to, from).await {
            Ok(response) if response.status == 200 => return (response, failed),
            Ok(response) if response.status < 500 => {
                panic!("{from}: a {} strands Ignition", response.status)
            }
            Ok(_) | Err(_) => failed += 1,
        }
        assert!(
            Instant::now() < give_up,
            "{from}: no config after {deadline:?} ({failed} failed attempts)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The rendered config named in the served config's node annotations file.
pub fn served_rendered_config(config: &Value) -> String {
    let files = mcs::served_files(config);
    let (_, annotations) = files
        .iter()
        .find(|(path, _)| path == "/etc/machine-config-daemon/node-annotations.json")
        .expect("the served config carries the node annotations");
    let annotations: Value = serde_json::from_slice(annotations).unwrap();
    annotations["machineconfiguration.openshift.io/currentConfig"]
        .as_str()
        .unwrap()
        .to_string()
}
