//! The requests `compare` sends to the original: one `GET /config/<pool>` per row, each on a
//! new connection (TLS, verified against `--against-ca`, when the URL says https), from
//! `--client-address` when given, with the Accept header of the spec asked, `Accept-Encoding:
//! identity` as Ignition sends it, and a `User-Agent` naming this tool so the original's log
//! shows what asked. Owns all of `compare`'s network I/O: it sends nothing else and binds no
//! serving port.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, StatusCode, Uri};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::rt::TokioIo;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;

use super::asks::Ask;
use super::verdict::Remote;

/// The `User-Agent` of every request.
pub const USER_AGENT: &str = concat!("machine-config-server-compare/", env!("CARGO_PKG_VERSION"));

/// The largest answer read (a served config is a few MB at most).
pub const MAX_BODY_BYTES: usize = 256 << 20;

/// A pool name in a path: anything but unreserved characters percent-encoded.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a request to the original failed (or could not be made).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("--against {0:?}: expected https://HOST[:PORT] or http://HOST[:PORT]")]
    Url(String),
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{host} has no address of the family of --client-address {client}")]
    NoAddress { host: String, client: IpAddr },
    #[error("cannot connect to {address}{}: {source}", from.map(|a| format!(" from {a}")).unwrap_or_default())]
    Connect {
        address: SocketAddr,
        from: Option<IpAddr>,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS handshake with {address}: {source}")]
    Tls {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("HTTP exchange with {address}: {source}")]
    Http {
        address: SocketAddr,
        #[source]
        source: hyper::Error,
    },
    #[error("reading the answer of {address}: {detail}")]
    Body { address: SocketAddr, detail: String },
    #[error("no answer from {address} within {} s", .timeout.as_secs())]
    Timeout {
        address: SocketAddr,
        timeout: Duration,
    },
}

impl FetchError {
    /// Short, stable name (logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Url(_) => "url",
            Self::Resolve { .. } => "resolve",
            Self::NoAddress { .. } => "no_address",
            Self::Connect { .. } => "connect",
            Self::Tls { .. } => "tls",
            Self::Http { .. } => "http",
            Self::Body { .. } => "body",
            Self::Timeout { .. } => "timeout",
        }
    }
}

/// Where the original listens, parsed from `--against`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    /// The host as written (brackets of an IPv6 address removed).
    pub host: String,
    pub port: u16,
}

impl Target {
    /// `https://HOST[:PORT]` (port 22623 by default) or `http://HOST[:PORT]` (22624), with no
    /// path beyond `/`.
    pub fn parse(url: &str) -> Result<Target, FetchError> {
        let bad = || FetchError::Url(url.to_string());
        let uri: Uri = url.parse().map_err(|_| bad())?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad()),
        };
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(bad());
        }
        let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(bad)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(if tls { 22623 } else { 22624 });
        Ok(Target {
            tls,
            host: host.to_string(),
            port,
        })
    }

    /// The `Host` header.
    fn authority(&self) -> String {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{}]:{}", self.host, self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

/// A running original, and how to ask it.
pub struct Original {
    target: Target,
    /// The TLS client and the name the certificate must carry (https only).
    tls: Option<(TlsConnector, ServerName<'static>)>,
    client_address: Option<IpAddr>,
    timeout: Duration,
}

impl Original {
    /// `tls` is the client configuration for an https target (ignored for http);
    /// `server_name` the name to verify, default the target's host.
    pub fn new(
        target: Target,
        tls: Option<Arc<rustls::ClientConfig>>,
        server_name: Option<&str>,
        client_address: Option<IpAddr>,
        timeout: Duration,
    ) -> Result<Original, FetchError> {
        let tls = match (target.tls, tls) {
            (true, Some(config)) => {
                let name = server_name.unwrap_or(&target.host);
                let name = ServerName::try_from(name.to_string())
                    .map_err(|_| FetchError::Url(name.to_string()))?;
                Some((TlsConnector::from(config), name))
            }
            (true, None) => return Err(FetchError::Url("https without a TLS client".into())),
            (false, _) => None,
        };
        Ok(Original {
            target,
            tls,
            client_address,
            timeout,
        })
    }

    /// The original's answer to `GET /config/<pool>` with the Accept header of `ask`.
    pub async fn get(&self, pool: &str, ask: Ask) -> Result<Remote, FetchError> {
        let address = self.resolve().await?;
        let exchange = async {
            let stream = self.connect(address).await?;
            let request = self.request(pool, ask);
            match &self.tls {
                None => exchange(stream, request, address).await,
                Some((connector, name)) => {
                    let stream = connector
                        .connect(name.clone(), stream)
                        .await
                        .map_err(|source| FetchError::Tls { address, source })?;
                    exchange(stream, request, address).await
                }
            }
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or(Err(FetchError::Timeout {
                address,
                timeout: self.timeout,
            }))
    }

    /// The first address of the target's host (of the client address's family, when one is
    /// given).
    async fn resolve(&self) -> Result<SocketAddr, FetchError> {
        let host = &self.target.host;
        let addresses = tokio::net::lookup_host((host.as_str(), self.target.port))
            .await
            .map_err(|source| FetchError::Resolve {
                host: host.clone(),
                source,
            })?;
        let mut addresses = addresses.filter(|a| match self.client_address {
            Some(client) => a.is_ipv4() == client.is_ipv4(),
            None => true,
        });
        addresses.next().ok_or_else(|| match self.client_address {
            Some(client) => FetchError::NoAddress {
                host: host.clone(),
                client,
            },
            None => FetchError::Resolve {
                host: host.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
            },
        })
    }

    async fn connect(&self, address: SocketAddr) -> Result<TcpStream, FetchError> {
        let failed = |source| FetchError::Connect {
            address,
            from: self.client_address,
            source,
        };
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(failed)?;
        if let Some(client) = self.client_address {
            socket.bind(SocketAddr::new(client, 0)).map_err(failed)?;
        }
        socket.connect(address).await.map_err(failed)
    }

    fn request(&self, pool: &str, ask: Ask) -> Request<Empty<Bytes>> {
        let path = format!("/config/{}", utf8_percent_encode(pool, PATH_SEGMENT));
        let mut request = Request::get(path)
            .header(header::HOST, self.target.authority())
            .header(header::USER_AGENT, USER_AGENT)
            .header(header::ACCEPT_ENCODING, "identity");
        if let Some(accept) = ask.accept_header() {
            request = request.header(header::ACCEPT, accept);
        }
        request
            .body(Empty::new())
            .unwrap_or_else(|_| Request::new(Empty::new()))
    }
}

/// One HTTP/1.1 request on `stream`, the whole answer read; the connection is closed after.
async fn exchange<S>(
    stream: S,
    request: Request<Empty<Bytes>>,
    address: SocketAddr,
) -> Result<Remote, FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let http = |source| FetchError::Http { address, source };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http)?;
    let answer = async move {
        let response = sender.send_request(request).await.map_err(http)?;
        // Dropping the sender lets the connection finish once the answer is read.
        drop(sender);
        let status: StatusCode = response.status();
        let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
            .collect()
            .await
            .map_err(|e| FetchError::Body {
                address,
                detail: e.to_string(),
            })?
            .to_bytes();
        Ok(Remote {
            status: status.as_u16(),
            body,
        })
    };
    // The connection is driven beside the request and ends with it.
    let (answer, _closed) = tokio::join!(answer, connection);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_https_or_http_urls_of_a_host() {
        let target = |url: &str| Target::parse(url).map_err(|e| e.to_string());
        assert_eq!(
            target("https://api-int.example.com:22623"),
            Ok(Target {
                tls: true,
                host: "api-int.example.com".into(),
                port: 22623
            })
        );
        assert_eq!(target("https://10.0.0.5/").unwrap().port, 22623);
        assert_eq!(target("http://10.0.0.5").unwrap().port, 22624);
        let v6 = Target::parse("https://[fd00::5]:22623").unwrap();
        assert_eq!(v6.host, "fd00::5");
        assert_eq!(v6.authority(), "[fd00::5]:22623");
        for bad in [
            "api-int:22623",
            "ftp://h",
            "https://h:22623/config/master",
            "https://",
            "https://h?x=1",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_carry_the_ask_and_name_the_tool() {
        let original = Original::new(
            Target::parse("http://127.0.0.1:22624").unwrap(),
            None,
            None,
            None,
            Duration::from_secs(1),
        )
        .unwrap();
        let request = original.request("mas ter", Ask::Spec(crate::ignition::SpecVersion::V3_4));
        assert_eq!(request.uri().path(), "/config/mas%20ter");
        let headers = request.headers();
        assert_eq!(headers[header::HOST], "127.0.0.1:22624");
        assert!(headers[header::USER_AGENT]
            .to_str()
            .unwrap()
            .starts_with("machine-config-server-compare/"));
        assert_eq!(
            headers[header::ACCEPT],
            "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1"
        );
        let request = original.request("master", Ask::NoAccept);
        assert!(request.headers().get(header::ACCEPT).is_none());
    }
}
