//! The `ignition` section (version, merged and replacing configs, proxies, certificate
//! authorities) and the resource rules every section shares: URLs and their schemes per spec
//! version, `data:` URLs, S3 ARNs, verification hashes, compression, HTTP headers.

use ignition_config::v3_5 as t;

use super::super::dataurl;
use super::super::gostd::{url_parse, GoUrl};
use super::super::json::{join_index, join_key};
use super::super::version::{GoSemver, SpecVersion};
use super::super::Config;
use super::Validator;

/// The resource URL rules of spec `spec`: a parseable URL with a supported scheme; `data:`
/// URLs must decode, `s3`/`arn` version ids must not be empty.
pub(crate) fn check_url(s: &str, spec: SpecVersion) -> Result<(), String> {
    let url = url_parse(s).map_err(|()| "unable to parse url".to_string())?;
    match url.scheme.as_str() {
        "http" | "https" | "tftp" => Ok(()),
        "gs" if spec >= SpecVersion::V3_2 => Ok(()),
        "s3" => check_version_id(&url),
        "arn" if spec >= SpecVersion::V3_4 => {
            check_s3_arn(&format!("arn:{}", url.opaque))?;
            check_version_id(&url)
        }
        "data" => dataurl::check(s).map_err(|e| e.reason),
        _ => Err("invalid url scheme".to_string()),
    }
}

fn check_version_id(url: &GoUrl<'_>) -> Result<(), String> {
    match url.query_values("versionId") {
        Some(values) if values.first().is_none_or(|v| v.is_empty()) => {
            Err("invalid S3 object VersionId".to_string())
        }
        _ => Ok(()),
    }
}

/// AWS ARN syntax as the original checks it, restricted to S3 object or access-point ARNs.
fn check_s3_arn(full: &str) -> Result<(), String> {
    const INVALID: &str = "invalid S3 ARN format";
    if !full.starts_with("arn:") || full.matches(':').count() < 5 {
        return Err(INVALID.to_string());
    }
    let sections: Vec<&str> = full.splitn(6, ':').collect();
    if sections.len() != 6 {
        return Err("arn: not enough sections".to_string());
    }
    if sections[1].is_empty() {
        return Err("arn: invalid partition".to_string());
    }
    if sections[2].is_empty() {
        return Err("arn: invalid service".to_string());
    }
    if sections[5].is_empty() {
        return Err("arn: invalid resource".to_string());
    }
    if sections[2] != "s3" {
        return Err(INVALID.to_string());
    }
    let slashes = full.split('/').count();
    if sections[5].starts_with("accesspoint/") {
        if slashes < 3 {
            return Err(INVALID.to_string());
        }
    } else if slashes < 2 {
        return Err(INVALID.to_string());
    }
    Ok(())
}

/// The hash rules: `function-hexsum`, sha512 (and sha256 from 3.1), right length.
pub(crate) fn check_hash(hash: &str, sha256_allowed: bool) -> Result<(), &'static str> {
    let Some((function, sum)) = hash.split_once('-') else {
        return Err("malformed hash specifier");
    };
    let expected = match function {
        "sha512" => 128,
        "sha256" if sha256_allowed => 64,
        _ => return Err("unrecognized hash function"),
    };
    if sum.len() != expected {
        return Err("incorrect size for hash sum");
    }
    Ok(())
}

impl Validator {
    pub(super) fn ignition(&mut self, ign: &t::Ignition) {
        match GoSemver::parse(&ign.version) {
            None => self.add(
                "ignition.version",
                "invalid config version (couldn't parse)",
            ),
            Some(v) if !v.is_exactly(self.spec) => {
                self.add("ignition.version", "unsupported config version")
            }
            Some(_) => {}
        }
        if let Some(config) = &ign.config {
            for (i, merge) in config.merge.iter().flatten().enumerate() {
                let path = join_index("ignition.config.merge", i);
                if self.spec >= SpecVersion::V3_1 {
                    self.required_source(&path, merge);
                }
                self.resource(&path, merge);
            }
            if let Some(replace) = &config.replace {
                self.resource("ignition.config.replace", replace);
            }
        }
        if let Some(proxy) = &ign.proxy {
            self.proxy_url("ignition.proxy.httpProxy", &proxy.http_proxy);
            self.proxy_url("ignition.proxy.httpsProxy", &proxy.https_proxy);
        }
        let cas = ign
            .security
            .iter()
            .flat_map(|s| s.tls.iter())
            .flat_map(|tls| tls.certificate_authorities.iter().flatten());
        for (i, ca) in cas.enumerate() {
            let path = join_index("ignition.security.tls.certificateAuthorities", i);
            if self.spec >= SpecVersion::V3_1 {
                self.required_source(&path, ca);
            } else {
                // 3.0 CAs carry a plain (required) string source.
                let source = ca.source.clone().unwrap_or_default();
                let result = self.url(&source);
                self.check(join_key(&path, "source"), result);
            }
            self.resource(&path, ca);
        }
    }

    pub(super) fn required_source(&mut self, path: &str, res: &t::Resource) {
        match res.source.as_deref() {
            None | Some("") => self.add(path, "source is required"),
            Some(source) => {
                let result = self.url(source);
                self.check(path, result);
            }
        }
    }

    pub(super) fn proxy_url(&mut self, path: &str, value: &Option<String>) {
        let Some(value) = value else { return };
        match url_parse(value) {
            Err(()) => self.add(path, "unable to parse url"),
            Ok(url) if url.scheme != "http" && url.scheme != "https" => {
                self.add(path, "proxies must be http(s)")
            }
            Ok(_) => {}
        }
    }

    pub(super) fn resource(&mut self, path: &str, res: &t::Resource) {
        if let Some(compression) = &res.compression {
            if !compression.is_empty() && compression != "gzip" {
                self.add(join_key(path, "compression"), "invalid compression method");
            }
        }
        let hash = res.verification.as_ref().and_then(|v| v.hash.as_ref());
        if hash.is_some() && res.source.is_none() {
            self.add(
                format!("{path}.verification.hash"),
                "source must be specified if verification is specified",
            );
        }
        if let Some(source) = res.source.as_deref().filter(|s| !s.is_empty()) {
            let result = self.url(source);
            self.check(join_key(path, "source"), result);
        }
        let headers = res.http_headers.as_deref().unwrap_or_default();
        if !headers.is_empty() {
            let scheme_ok = match res.source.as_deref() {
                None | Some("") => Err("unable to parse url"),
                Some(source) => match url_parse(source) {
                    Err(()) => Err("unable to parse url"),
                    Ok(url) if url.scheme == "http" || url.scheme == "https" => Ok(()),
                    Ok(_) => Err("cannot use HTTP headers with this source scheme"),
                },
            };
            self.check(join_key(path, "httpHeaders"), scheme_ok);
        }
        for (i, header) in headers.iter().enumerate() {
            let header_path = join_index(&join_key(path, "httpHeaders"), i);
            if header.name.is_empty() {
                self.add(
                    join_key(&header_path, "name"),
                    "HTTP header name can't be empty",
                );
            }
            if header.value.as_deref() == Some("") {
                self.add(
                    join_key(&header_path, "value"),
                    "unable to parse HTTP header",
                );
            }
        }
        if let Some(hash) = hash {
            let result = check_hash(hash, self.spec >= SpecVersion::V3_1);
            self.check(format!("{path}.verification.hash"), result);
        }
    }

    pub(super) fn ignition_duplicates(&mut self, c: &Config) {
        if let Some(config) = &c.ignition.config {
            let merge = config.merge.as_deref().unwrap_or_default();
            self.dups("ignition.config.merge", merge.iter().map(resource_key));
            for (i, m) in merge.iter().enumerate() {
                self.header_dups(&join_index("ignition.config.merge", i), m);
            }
            if let Some(replace) = &config.replace {
                self.header_dups("ignition.config.replace", replace);
            }
        }
        if let Some(proxy) = &c.ignition.proxy {
            self.dups(
                "ignition.proxy.noProxy",
                proxy.no_proxy.iter().flatten().cloned(),
            );
        }
        if let Some(tls) = c.ignition.security.as_ref().and_then(|s| s.tls.as_ref()) {
            let cas = tls.certificate_authorities.as_deref().unwrap_or_default();
            let path = "ignition.security.tls.certificateAuthorities";
            self.dups(path, cas.iter().map(resource_key));
            for (i, ca) in cas.iter().enumerate() {
                self.header_dups(&join_index(path, i), ca);
            }
        }
    }

    /// Header names repeated in one resource.
    pub(super) fn header_dups(&mut self, path: &str, res: &t::Resource) {
        self.dups(
            &join_key(path, "httpHeaders"),
            res.http_headers.iter().flatten().map(|h| h.name.clone()),
        );
    }
}

/// The key under which resources (merged configs, CAs) must be unique: the source.
pub(super) fn resource_key(res: &t::Resource) -> String {
    res.source.clone().unwrap_or_default()
}
