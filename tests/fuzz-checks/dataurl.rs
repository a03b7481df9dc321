//! Data URLs: `ignition::dataurl::{encode, decode, check}`. The input is both the bytes to
//! encode and, when UTF-8, a URL to decode (as is, and behind a `data:` prefix so most inputs
//! reach the media type and data lexers).
//!
//! Properties: `encode` writes ASCII that `check` accepts and `decode` turns back into the
//! bytes; `check` accepts exactly what `decode` accepts; what decodes, encoded again (as
//! percent-encoding or as base64), decodes to the same bytes.

use base64::Engine as _;
use machine_config_server::ignition::dataurl;

pub fn check(data: &[u8]) {
    round_trip(data);
    if let Ok(text) = std::str::from_utf8(data) {
        decode_consistently(text);
        decode_consistently(&format!("data:{text}"));
    }
}

fn round_trip(bytes: &[u8]) {
    let url = dataurl::encode(bytes);
    assert!(url.is_ascii(), "encode writes ASCII");
    assert_eq!(dataurl::check(&url), Ok(()), "check accepts {url:?}");
    assert_eq!(
        dataurl::decode(&url).as_deref(),
        Ok(bytes),
        "{url:?} round trip"
    );
}

fn decode_consistently(url: &str) {
    let decoded = dataurl::decode(url);
    assert_eq!(
        dataurl::check(url).is_ok(),
        decoded.is_ok(),
        "check and decode disagree on {url:?}: {decoded:?}"
    );
    if let Ok(bytes) = decoded {
        round_trip(&bytes);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        for again in [
            format!("data:;base64,{b64}"),
            format!("data:text/plain;charset=utf-8;base64,{b64}"),
        ] {
            assert_eq!(
                dataurl::decode(&again).as_deref(),
                Ok(&bytes[..]),
                "{again:?}"
            );
        }
    }
}
