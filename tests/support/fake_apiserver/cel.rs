//! CRD validation rules: evaluates every `x-kubernetes-validations` (CEL) rule of a CRD schema
//! on a write, the way kube-apiserver's apiextensions validator does.
//!
//! Owns: walking the schema alongside the object (rules on objects, on array items via `items`,
//! on map values via `additionalProperties`, on scalars; only non-null values are checked),
//! binding `self` to the value at the rule's place (typed by the schema: `integer` → int,
//! `date-time`/`date` strings → timestamp, `duration` → duration, `byte` → bytes), `oldSelf`
//! for transition rules (a rule that uses `oldSelf` runs only on updates where the old value
//! correlates: same map key, or same key values in an `x-kubernetes-list-type: map` list;
//! `optionalOldSelf: true` rules always run, with `oldSelf` an optional), validation
//! ratcheting (a failing rule that does not use `oldSelf` on a value unchanged since the old
//! object is not an error, CRDValidationRatcheting, on by default since Kubernetes 1.30),
//! `message`, `messageExpression`, `fieldPath` and `reason`, and the Kubernetes error text:
//! `<path>: Invalid value: "<schema type>": <message>` (`<nil>` for the resource root,
//! `failed rule: <rule>` without a message, `<error> evaluating rule: <rule>` for a runtime
//! error such as `no such key`).
//!
//! The expression language is the `cel-interpreter` crate, plus the Kubernetes library
//! functions the real CRDs use, with Kubernetes' semantics: `isIP`, `ip()`, `.family()`,
//! `isCIDR`, `cidr()`, `isURL`, `format.dns1123Subdomain()`/`dns1123Label()`/
//! `dns1035Label()` `.validate()`, optionals as `oldSelf.hasValue()`/`.value()`/`.orValue()`,
//! cel-go string extensions (`lowerAscii`, `upperAscii`, `split`, `indexOf`, `replace`,
//! `trim`, `join`), `size` in code points, `matches` (RE2 syntax as far as the `regex` crate
//! shares it), `timestamp()` on timestamps. Optionals are transparent: `optional.of(x)` is `x`
//! and `optional.none()` is `null`, which is exact for the rules the CRDs contain (type-checked
//! CEL never calls `hasValue` on a non-optional).
//!
//! Never "valid" by accident: a rule that does not parse, calls a function this module does not
//! provide, or fails in a way only an incomplete evaluator would (a panic, an unsupported
//! operand) is an [`Unsupported`] error: the server answers 500 naming the rule and records it
//! ([`take_failures`]), and `FakeApiServer` fails the test when it is dropped. `&&` and `||`
//! absorb errors as CEL's do (`error || true` is true). Left out: runtime cost budgets, error
//! absorption across the iterations of `all`/`exists` (an error ends the macro) and set/map-list
//! equality ignoring order. Declared property names are escaped as Kubernetes escapes them
//! (`foo-bar` is `self.foo__dash__bar`, `namespace` is `self.__namespace__`).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, OnceLock};

use cel_interpreter::extractors::This;
use cel_interpreter::objects::Key;
use cel_interpreter::{Context, ExecutionError, FunctionContext, IdedExpr, Value as Cel};
use serde_json::Value;

use super::status::{BadValue, Cause, FieldError};

/// A rule the evaluator could not handle: the request fails with 500 and the test run fails.
#[derive(Clone, Debug, PartialEq)]
pub struct Unsupported {
    /// Field path of the value the rule applies to (`<nil>` for the resource root).
    pub path: String,
    pub rule: String,
    pub why: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CEL rule at {} could not be evaluated by the in-test API server: {:?}: {}",
            self.path, self.rule, self.why
        )
    }
}

/// One `x-kubernetes-validations` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    pub field_path: Option<String>,
    pub reason: Option<String>,
    pub optional_old_self: bool,
}

impl Rule {
    fn from_json(value: &Value) -> Option<Rule> {
        let text = |k: &str| {
            value
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        };
        Some(Rule {
            rule: text("rule")?,
            message: text("message"),
            message_expression: text("messageExpression"),
            field_path: text("fieldPath"),
            reason: text("reason"),
            optional_old_self: value.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        })
    }

    /// Kubernetes' `ruleErrorString`: the message, else the rule.
    fn error_string(&self) -> &str {
        self.message.as_deref().unwrap_or(&self.rule).trim()
    }

    /// Kubernetes' `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        match &self.message {
            Some(m) => m.trim().to_string(),
            None => format!("failed rule: {}", self.rule.trim()),
        }
    }
}

/// Every rule of a schema with the schema path it sits at (`.spec.items[]`, `.x{}` for map
/// values), for tests that must cover all of them.
pub fn rules_of(schema: &Value) -> Vec<(String, Rule)> {
    let mut out = Vec::new();
    collect_rules(schema, "", &mut out);
    out
}

fn collect_rules(schema: &Value, path: &str, out: &mut Vec<(String, Rule)>) {
    for rule in schema_rules(schema) {
        out.push((path.to_string(), rule));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            collect_rules(child, &format!("{path}.{k}"), out);
        }
    }
    if let Some(items) = schema.get("items").filter(|s| s.is_object()) {
        collect_rules(items, &format!("{path}[]"), out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        collect_rules(values, &format!("{path}{{}}"), out);
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            collect_rules(sub, path, out);
        }
    }
}

fn schema_rules(schema: &Value) -> Vec<Rule> {
    schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().filter_map(Rule::from_json).collect())
        .unwrap_or_default()
}

struct Compiled {
    expression: IdedExpr,
    uses_old_self: bool,
}

/// Parses a rule and checks that every function it calls exists here, so a rule we cannot
/// evaluate fails even when its unsupported part would be short-circuited away.
pub fn compile(rule: &str) -> Result<(), String> {
    compiled(rule).map(|_| ())
}

fn compiled(rule: &str) -> Result<Arc<Compiled>, String> {
    type Cache = Mutex<HashMap<String, Result<Arc<Compiled>, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(rule).cloned()) {
        return hit;
    }
    let result = compile_uncached(rule);
    if let Ok(mut c) = cache.lock() {
        c.insert(rule.to_string(), result.clone());
    }
    result
}

fn compile_uncached(rule: &str) -> Result<Arc<Compiled>, String> {
    let mut expression = std::panic::catch_unwind(|| cel_parser::Parser::default().parse(rule))
        .map_err(|_| "the CEL parser panicked".to_string())?
        .map_err(|e| format!("parse error: {e}"))?;
    absorb_errors_in_logic(&mut expression);
    let references = expression.references();
    let mut unknown: Vec<&str> = references
        .functions()
        .into_iter()
        .filter(|f| !OPERATORS.contains(f) && !FUNCTIONS.contains(f))
        .collect();
    unknown.sort_unstable();
    if !unknown.is_empty() {
        return Err(format!("undeclared function(s): {}", unknown.join(", ")));
    }
    let uses_old_self = references.has_variable("oldSelf");
    drop(references);
    Ok(Arc::new(Compiled {
        expression,
        uses_old_self,
    }))
}

/// CEL's `&&` and `||` are commutative over errors (`error || true` is true, `error && false`
/// is false); the interpreter's own operators propagate the left error. Route them to
/// [`logical_and`] and [`logical_or`] instead.
fn absorb_errors_in_logic(expr: &mut IdedExpr) {
    use cel_parser::ast::{EntryExpr, Expr};
    match &mut expr.expr {
        Expr::Call(call) => {
            if call.args.len() == 2 && call.target.is_none() {
                let renamed = match call.func_name.as_str() {
                    "_&&_" => Some(LOGICAL_AND),
                    "_||_" => Some(LOGICAL_OR),
                    _ => None,
                };
                if let Some(name) = renamed {
                    call.func_name = name.to_string();
                    // The interpreter evaluates the first of exactly two arguments before it
                    // looks the function up; a third (unused) one keeps both unevaluated.
                    let pad = IdedExpr {
                        id: expr.id,
                        expr: Expr::Literal(cel_parser::reference::Val::Null),
                    };
                    call.args.push(pad);
                }
            }
            if let Some(target) = &mut call.target {
                absorb_errors_in_logic(target);
            }
            call.args.iter_mut().for_each(absorb_errors_in_logic);
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                absorb_errors_in_logic(part);
            }
        }
        Expr::Select(select) => absorb_errors_in_logic(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(absorb_errors_in_logic),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    absorb_errors_in_logic(&mut e.key);
                    absorb_errors_in_logic(&mut e.value);
                }
            }
        }
        _ => {}
    }
}

const LOGICAL_AND: &str = "@k8s_and";
const LOGICAL_OR: &str = "@k8s_or";

/// CEL `&&`: false if either side is false, else the first error, else true.
fn logical_and(ftx: &FunctionContext, left: IdedExpr, right: IdedExpr, _pad: IdedExpr) -> Outcome {
    logical(ftx, &left, &right, false)
}

/// CEL `||`: true if either side is true, else the first error, else false.
fn logical_or(ftx: &FunctionContext, left: IdedExpr, right: IdedExpr, _pad: IdedExpr) -> Outcome {
    logical(ftx, &left, &right, true)
}

fn logical(ftx: &FunctionContext, left: &IdedExpr, right: &IdedExpr, decisive: bool) -> Outcome {
    let as_bool = |expr: &IdedExpr| -> Result<bool, ExecutionError> {
        match Cel::resolve(expr, ftx.ptx)? {
            Cel::Bool(b) => Ok(b),
            other => Err(ftx.error(format!("no such overload: logical operator on {other:?}"))),
        }
    };
    let left = as_bool(left);
    if left.as_ref().ok() == Some(&decisive) {
        return Ok(Cel::Bool(decisive));
    }
    let right = as_bool(right);
    if right.as_ref().ok() == Some(&decisive) {
        return Ok(Cel::Bool(decisive));
    }
    left?;
    right?;
    Ok(Cel::Bool(!decisive))
}

/// Operators the interpreter evaluates itself (macros expand to these).
const OPERATORS: &[&str] = &[
    LOGICAL_AND,
    LOGICAL_OR,
    "_?_:_",
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_[_]",
    "@in",
    "@not_strictly_false",
];

/// Functions the evaluation context provides (the crate's defaults plus [`library`]).
const FUNCTIONS: &[&str] = &[
    // cel-interpreter's standard functions.
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "matches",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    // Kubernetes library and cel-go extensions, below.
    "isIP",
    "ip",
    "family",
    "isCIDR",
    "cidr",
    "prefixLength",
    "isURL",
    "dns1123Subdomain",
    "dns1123Label",
    "dns1035Label",
    "validate",
    "hasValue",
    "value",
    "orValue",
    "lowerAscii",
    "upperAscii",
    "split",
    "indexOf",
    "replace",
    "trim",
    "join",
];

/// The evaluation context with every function; each evaluation adds its variables in an inner
/// scope.
fn root() -> &'static Context<'static> {
    static ROOT: OnceLock<Context<'static>> = OnceLock::new();
    ROOT.get_or_init(library)
}

/// Marker keys of the library's object values (never JSON property names: they start NUL).
const IP_KEY: &str = "\u{0}ip";
const CIDR_KEY: &str = "\u{0}cidr";
const FORMAT_KEY: &str = "\u{0}format";

fn library() -> Context<'static> {
    let mut ctx = Context::default();
    ctx.add_variable_from_value("format", marker(FORMAT_KEY, ""));
    ctx.add_function(LOGICAL_AND, logical_and);
    ctx.add_function(LOGICAL_OR, logical_or);
    ctx.add_function("size", size);
    ctx.add_function("matches", matches);
    ctx.add_function("timestamp", timestamp);
    ctx.add_function("isIP", |This(s): This<Arc<String>>| parse_ip(&s).is_ok());
    ctx.add_function("ip", ip);
    ctx.add_function("family", family);
    ctx.add_function("isCIDR", |This(s): This<Arc<String>>| {
        parse_cidr(&s).is_ok()
    });
    ctx.add_function("cidr", cidr);
    ctx.add_function("prefixLength", prefix_length);
    ctx.add_function("isURL", |This(s): This<Arc<String>>| is_url(&s));
    ctx.add_function("dns1123Subdomain", |This(f): This<Cel>| {
        format_of(f, "dns1123Subdomain")
    });
    ctx.add_function("dns1123Label", |This(f): This<Cel>| {
        format_of(f, "dns1123Label")
    });
    ctx.add_function("dns1035Label", |This(f): This<Cel>| {
        format_of(f, "dns1035Label")
    });
    ctx.add_function("validate", validate_format);
    ctx.add_function("hasValue", |This(v): This<Cel>| v != Cel::Null);
    ctx.add_function("value", optional_value);
    ctx.add_function("orValue", or_value);
    ctx.add_function("lowerAscii", |This(s): This<Arc<String>>| {
        s.to_ascii_lowercase()
    });
    ctx.add_function("upperAscii", |This(s): This<Arc<String>>| {
        s.to_ascii_uppercase()
    });
    ctx.add_function("split", split);
    ctx.add_function("indexOf", index_of);
    ctx.add_function("replace", replace);
    ctx.add_function("trim", |This(s): This<Arc<String>>| s.trim().to_string());
    ctx.add_function("join", join);
    ctx
}

fn marker(key: &str, value: &str) -> Cel {
    Cel::from(HashMap::from([(key.to_string(), value.to_string())]))
}

fn marker_value(value: &Cel, key: &str) -> Option<String> {
    match value {
        Cel::Map(m) if m.map.len() == 1 => match m.map.get(&Key::from(key)) {
            Some(Cel::String(s)) => Some(s.to_string()),
            _ => None,
        },
        _ => None,
    }
}

type Outcome = Result<Cel, ExecutionError>;

/// Errors a real kube-apiserver also raises at runtime (then a 422 "evaluating rule").
const RUNTIME_ERROR_FUNCTIONS: &[&str] = &["ip", "cidr", "timestamp", "value", "duration"];

/// CEL's `size`: strings count code points, not bytes.
fn size(ftx: &FunctionContext, This(this): This<Cel>) -> Result<i64, ExecutionError> {
    let n = match this {
        Cel::String(s) => s.chars().count(),
        Cel::List(l) => l.len(),
        Cel::Map(m) => m.map.len(),
        Cel::Bytes(b) => b.len(),
        other => return Err(ftx.error(format!("no size of {other:?}"))),
    };
    Ok(n as i64)
}

fn matches(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    pattern: Arc<String>,
) -> Result<bool, ExecutionError> {
    static CACHE: OnceLock<Mutex<HashMap<String, regex::Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache
        .lock()
        .map_err(|_| ftx.error("regex cache poisoned"))?;
    if !cache.contains_key(pattern.as_str()) {
        let re = regex::Regex::new(&pattern)
            .map_err(|e| ftx.error(format!("invalid regex {pattern:?}: {e}")))?;
        cache.insert(pattern.to_string(), re);
    }
    Ok(cache[pattern.as_str()].is_match(&this))
}

fn timestamp(ftx: &FunctionContext, This(this): This<Cel>) -> Outcome {
    match this {
        Cel::Timestamp(t) => Ok(Cel::Timestamp(t)),
        Cel::String(s) => chrono::DateTime::parse_from_rfc3339(&s)
            .map(Cel::Timestamp)
            .map_err(|e| ftx.error(format!("timestamp {s:?}: {e}"))),
        other => Err(ftx.error(format!("no timestamp of {other:?}"))),
    }
}

/// Kubernetes `library.IP`'s parser: `netip.ParseAddr` without zones or IPv4-mapped IPv6.
fn parse_ip(text: &str) -> Result<std::net::IpAddr, String> {
    if text.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {text}"));
    }
    let addr: std::net::IpAddr = text
        .parse()
        .map_err(|_| format!("IP Address {text:?} parse error during conversion from string"))?;
    if let std::net::IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {text:?} is not allowed"));
        }
    }
    Ok(addr)
}

/// Kubernetes `library.CIDR`'s parser: `netip.ParsePrefix` with the same restrictions.
fn parse_cidr(text: &str) -> Result<(std::net::IpAddr, u8), String> {
    let (addr, bits) = text.split_once('/').ok_or_else(|| {
        format!("network address parse error during conversion from string: {text}")
    })?;
    let addr = parse_ip(addr)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let valid_digits = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    match bits.parse::<u8>() {
        Ok(n) if valid_digits && n <= max => Ok((addr, n)),
        _ => Err(format!(
            "network address parse error during conversion from string: {text}"
        )),
    }
}

fn ip(ftx: &FunctionContext, This(this): This<Cel>) -> Outcome {
    if let Some(cidr) = marker_value(&this, CIDR_KEY) {
        // cidr(...).ip(): the prefix's address.
        let (addr, _) = parse_cidr(&cidr).map_err(|e| ftx.error(e))?;
        return Ok(marker(IP_KEY, &addr.to_string()));
    }
    match this {
        Cel::String(s) => parse_ip(&s)
            .map(|a| marker(IP_KEY, &a.to_string()))
            .map_err(|e| ftx.error(e)),
        other => Err(ftx.error(format!("no ip() of {other:?}"))),
    }
}

fn family(ftx: &FunctionContext, This(this): This<Cel>) -> Outcome {
    let addr = marker_value(&this, IP_KEY).ok_or_else(|| ftx.error("family() needs an ip"))?;
    let parsed = parse_ip(&addr).map_err(|e| ftx.error(e))?;
    Ok(Cel::Int(if parsed.is_ipv4() { 4 } else { 6 }))
}

fn cidr(ftx: &FunctionContext, This(this): This<Arc<String>>) -> Outcome {
    parse_cidr(&this)
        .map(|(addr, bits)| marker(CIDR_KEY, &format!("{addr}/{bits}")))
        .map_err(|e| ftx.error(e))
}

fn prefix_length(ftx: &FunctionContext, This(this): This<Cel>) -> Outcome {
    let cidr =
        marker_value(&this, CIDR_KEY).ok_or_else(|| ftx.error("prefixLength() needs a cidr"))?;
    let (_, bits) = parse_cidr(&cidr).map_err(|e| ftx.error(e))?;
    Ok(Cel::Int(i64::from(bits)))
}

/// Kubernetes `isURL`: Go's `url.ParseRequestURI` succeeds. Its rules: no control bytes; a
/// scheme (a letter, then letters, digits, `+`, `-`, `.`) or else an absolute path; the query
/// starts at the first `?` and is not checked (a `#fragment` after it or after the path is
/// accepted: request URIs have no fragment, so `#` is just a character there); after
/// `scheme://` the authority (userinfo `@` host `:` port) is checked as `parseAuthority` does;
/// a path's `%` escapes must be well formed. Without `//` a scheme takes anything as opaque
/// data (`urn:isbn:1`, `localhost:8080`).
fn is_url(text: &str) -> bool {
    if text.is_empty() || text.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if text == "*" {
        return true;
    }
    let Some((scheme, rest)) = url_scheme(text) else {
        return false;
    };
    let rest = rest.split_once('?').map_or(rest, |(before, _query)| before);
    if !rest.starts_with('/') {
        return !scheme.is_empty();
    }
    let mut path = rest;
    if !scheme.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            let (authority, after_authority) =
                after.split_at(after.find('/').unwrap_or(after.len()));
            if !url_authority_ok(authority) {
                return false;
            }
            path = after_authority;
        }
    }
    url_escapes_ok(path, Escapes::Other)
}

/// Go's `getScheme`: `Some(("", text))` when there is none, `None` for a leading `:`.
fn url_scheme(text: &str) -> Option<(&str, &str)> {
    for (i, c) in text.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return None,
            ':' => return Some((&text[..i], &text[i + 1..])),
            _ => return Some(("", text)),
        }
    }
    Some(("", text))
}

/// Go's `parseAuthority` and `parseHost`.
fn url_authority_ok(authority: &str) -> bool {
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let userinfo_ok = userinfo.is_none_or(|userinfo| {
        userinfo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c))
            && url_escapes_ok(userinfo, Escapes::Other)
    });
    if !userinfo_ok {
        return false;
    }
    let port_ok = |port: &str| {
        port.is_empty()
            || port
                .strip_prefix(':')
                .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
    };
    if host.starts_with('[') {
        let Some(close) = host.rfind(']') else {
            return false;
        };
        if !port_ok(&host[close + 1..]) {
            return false;
        }
        // An IPv6 zone (from `%25` up to `]`) may escape any byte.
        if let Some(zone) = host[..close].find("%25") {
            return url_escapes_ok(&host[..zone], Escapes::Host)
                && url_escapes_ok(&host[zone..close], Escapes::Zone)
                && url_escapes_ok(&host[close..], Escapes::Host);
        }
    } else if let Some(colon) = host.rfind(':') {
        if !port_ok(&host[colon..]) {
            return false;
        }
    }
    url_escapes_ok(host, Escapes::Host)
}

/// Which part of a URL Go's `unescape` reads.
#[derive(Clone, Copy, PartialEq)]
enum Escapes {
    Host,
    Zone,
    /// Path or userinfo: only the `%` escapes are checked.
    Other,
}

/// Go's `unescape`: every `%` starts two hex digits; in a host or zone only unreserved and
/// sub-delimiter characters and `:[]<>"` stand unescaped (non-ASCII bytes too), and a host's
/// `%` may encode only non-ASCII bytes (or be `%25`).
fn url_escapes_ok(text: &str, mode: Escapes) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_hexdigit);
            if !hex(i + 1) || !hex(i + 2) {
                return false;
            }
            if mode == Escapes::Host && bytes[i + 1] < b'8' && &bytes[i..i + 3] != b"%25" {
                return false;
            }
            i += 3;
            continue;
        }
        let unescaped_ok =
            b >= 0x80 || b.is_ascii_alphanumeric() || b"!$&'()*+,;=:[]<>\"-_.~".contains(&b);
        if mode != Escapes::Other && !unescaped_ok {
            return false;
        }
        i += 1;
    }
    true
}

fn format_of(target: Cel, name: &str) -> Outcome {
    match marker_value(&target, FORMAT_KEY) {
        Some(_) => Ok(marker(FORMAT_KEY, name)),
        None => Err(ExecutionError::function_error(name, "not called on format")),
    }
}

/// `format.<name>().validate(s)`: `optional.none()` when valid, else the list of errors.
fn validate_format(ftx: &FunctionContext, This(this): This<Cel>, text: Arc<String>) -> Outcome {
    let name = marker_value(&this, FORMAT_KEY)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ftx.error("validate() needs a format"))?;
    let errors = match name.as_str() {
        "dns1123Subdomain" => dns1123_subdomain_errors(&text),
        "dns1123Label" => dns1123_label_errors(&text),
        "dns1035Label" => dns1035_label_errors(&text),
        other => return Err(ftx.error(format!("unknown format {other}"))),
    };
    Ok(if errors.is_empty() {
        Cel::Null
    } else {
        Cel::List(Arc::new(errors.into_iter().map(Cel::from).collect()))
    })
}

fn dns_label_chars(s: &str, first_alpha: bool) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && (if first_alpha {
            bytes[0].is_ascii_lowercase()
        } else {
            alnum(bytes[0])
        })
        && alnum(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| alnum(b) || b == b'-')
}

/// apimachinery `IsDNS1123Label`.
fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !dns_label_chars(s, false) {
        errors.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errors
}

/// apimachinery `IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    if !s.split('.').all(|label| dns_label_chars(label, false)) {
        errors.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    errors
}

/// apimachinery `IsDNS1035Label`.
fn dns1035_label_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !dns_label_chars(s, true) {
        errors.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errors
}

fn optional_value(ftx: &FunctionContext, This(this): This<Cel>) -> Outcome {
    match this {
        Cel::Null => Err(ftx.error("optional.none() dereference")),
        v => Ok(v),
    }
}

fn or_value(This(this): This<Cel>, other: Cel) -> Outcome {
    Ok(if this == Cel::Null { other } else { this })
}

/// cel-go strings extension `split(sep)` / `split(sep, n)` (Go's `strings.SplitN`).
fn split(ftx: &FunctionContext, This(this): This<Arc<String>>, separator: Arc<String>) -> Outcome {
    let limit = match ftx.args.len() {
        1 => -1,
        2 => match argument(ftx, 1)? {
            Cel::Int(n) => n,
            other => return Err(ftx.error(format!("split limit {other:?}"))),
        },
        n => return Err(ExecutionError::invalid_argument_count(1, n)),
    };
    let parts: Vec<String> = match limit {
        0 => Vec::new(),
        n if n < 0 => go_split(&this, &separator, usize::MAX),
        n => go_split(&this, &separator, n as usize),
    };
    Ok(Cel::List(Arc::new(
        parts.into_iter().map(Cel::from).collect(),
    )))
}

fn go_split(s: &str, sep: &str, limit: usize) -> Vec<String> {
    if sep.is_empty() {
        // Go splits into UTF-8 sequences; the last part keeps the rest.
        let chars: Vec<char> = s.chars().collect();
        let mut out: Vec<String> = Vec::new();
        for (i, c) in chars.iter().enumerate() {
            if out.len() + 1 == limit {
                out.push(chars[i..].iter().collect());
                return out;
            }
            out.push(c.to_string());
        }
        return out;
    }
    s.splitn(limit, sep).map(str::to_string).collect()
}

/// The argument at `index` of the call, evaluated (for optional trailing arguments).
fn argument(ftx: &FunctionContext, index: usize) -> Outcome {
    let expr = ftx
        .args
        .get(index)
        .ok_or_else(|| ExecutionError::invalid_argument_count(index + 1, ftx.args.len()))?;
    Cel::resolve(expr, ftx.ptx)
}

/// cel-go strings extension `indexOf(sub)` / `indexOf(sub, offset)`, in code points.
fn index_of(ftx: &FunctionContext, This(this): This<Cel>, needle: Cel) -> Outcome {
    let (Cel::String(hay), Cel::String(needle)) = (this, needle) else {
        return Err(ftx.error("indexOf on lists is not provided"));
    };
    let offset = match ftx.args.len() {
        1 => 0,
        _ => match argument(ftx, 1)? {
            Cel::Int(n) if n >= 0 => n as usize,
            other => return Err(ftx.error(format!("index out of range: {other:?}"))),
        },
    };
    let chars: Vec<char> = hay.chars().collect();
    if offset > chars.len() {
        return Err(ftx.error(format!("index out of range: {offset}")));
    }
    let rest: String = chars[offset..].iter().collect();
    Ok(Cel::Int(match rest.find(needle.as_str()) {
        Some(byte) => (offset + rest[..byte].chars().count()) as i64,
        None => -1,
    }))
}

/// cel-go strings extension `replace(old, new)` / `replace(old, new, n)`.
fn replace(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    from: Arc<String>,
    to: Arc<String>,
) -> Outcome {
    let limit = match ftx.args.len() {
        2 => -1,
        _ => match argument(ftx, 2)? {
            Cel::Int(n) => n,
            other => return Err(ftx.error(format!("replace limit {other:?}"))),
        },
    };
    Ok(Cel::from(if limit < 0 {
        this.replace(from.as_str(), &to)
    } else {
        this.replacen(from.as_str(), &to, limit as usize)
    }))
}

/// cel-go strings extension `join()` / `join(sep)` on a list of strings.
fn join(ftx: &FunctionContext, This(this): This<Arc<Vec<Cel>>>) -> Outcome {
    let separator = match ftx.args.len() {
        0 => String::new(),
        _ => match argument(ftx, 0)? {
            Cel::String(s) => s.to_string(),
            other => return Err(ftx.error(format!("join separator {other:?}"))),
        },
    };
    let parts: Result<Vec<String>, _> = this
        .iter()
        .map(|v| match v {
            Cel::String(s) => Ok(s.to_string()),
            other => Err(ftx.error(format!("join of {other:?}"))),
        })
        .collect();
    Ok(Cel::from(parts?.join(&separator)))
}

/// JSON to CEL, typed by the schema the way Kubernetes' `UnstructuredToVal` does.
pub fn to_cel(value: &Value, schema: Option<&Value>) -> Cel {
    let ty = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
    let format = schema.and_then(|s| s.get("format")).and_then(Value::as_str);
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (ty, n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some("number"), _, _, Some(f)) => Cel::Float(f),
            (_, Some(i), _, _) => Cel::Int(i),
            (_, None, Some(u), _) => Cel::UInt(u),
            (_, _, _, f) => Cel::Float(f.unwrap_or_default()),
        },
        Value::String(s) => match format {
            Some("date-time") => chrono::DateTime::parse_from_rfc3339(s)
                .map(Cel::Timestamp)
                .unwrap_or_else(|_| Cel::from(s.as_str())),
            Some("date") => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|d| Cel::Timestamp(d.and_utc().fixed_offset()))
                .unwrap_or_else(|| Cel::from(s.as_str())),
            Some("byte") => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map(Cel::from)
                    .unwrap_or_else(|_| Cel::from(s.as_str()))
            }
            _ => Cel::from(s.as_str()),
        },
        Value::Array(items) => {
            let item_schema = schema
                .and_then(|s| s.get("items"))
                .filter(|s| s.is_object());
            Cel::List(Arc::new(
                items.iter().map(|i| to_cel(i, item_schema)).collect(),
            ))
        }
        Value::Object(map) => {
            let props = schema
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object);
            let additional = schema
                .and_then(|s| s.get("additionalProperties"))
                .filter(|s| s.is_object());
            let converted: HashMap<String, Cel> = map
                .iter()
                .filter_map(|(k, v)| match props.and_then(|p| p.get(k)) {
                    // Declared properties are CEL fields: escaped, or invisible when they
                    // cannot be (Kubernetes leaves those out of the object type).
                    Some(child) => escape_property(k).map(|name| (name, to_cel(v, Some(child)))),
                    None => Some((k.clone(), to_cel(v, additional))),
                })
                .collect();
            Cel::from(converted)
        }
    }
}

/// Kubernetes' property-name escaping for CEL: reserved words become `__word__`; `__`, `.`,
/// `-` and `/` become `__underscores__`, `__dot__`, `__dash__`, `__slash__`; a name that starts
/// with a digit or holds any other character has no CEL name (`None`).
pub fn escape_property(name: &str) -> Option<String> {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// Evaluates every rule of `schema` (a CRD's `openAPIV3Schema`) on `new`, with `old` on
/// updates. Returns the violations as 422 causes.
/// Whether a schema has any `x-kubernetes-validations` rule (kube-apiserver builds no CEL
/// validator for a CRD version without one).
pub fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|rules| !rules.is_empty())
                || map.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

pub fn validate(
    schema: &Value,
    old: Option<&Value>,
    new: &Value,
) -> Result<Vec<Cause>, Unsupported> {
    validate_ratcheting(schema, old, new).map(|(causes, _)| causes)
}

/// [`validate`], and the warnings of violations the ratcheting of an unchanged value lets pass
/// (`field: message`, as kube-apiserver's `Warning` headers word them).
pub fn validate_ratcheting(
    schema: &Value,
    old: Option<&Value>,
    new: &Value,
) -> Result<(Vec<Cause>, Vec<String>), Unsupported> {
    let mut walk = Walk::default();
    walk.node(schema, "", new, old, Ratchet::root(old, new))?;
    Ok((walk.causes, walk.warnings))
}

/// Evaluates one rule on the value `new` of the schema node `schema` (with `old` as `oldSelf`),
/// without looking at children: the violations, or why the rule cannot be evaluated.
pub fn check_rule(
    rule: &Rule,
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
) -> Result<Vec<Cause>, Unsupported> {
    let mut walk = Walk::default();
    let ratchet = Ratchet { unchanged: false };
    walk.rules(vec![rule.clone()], schema, "", new, old, ratchet)?;
    Ok(walk.causes)
}

#[derive(Default)]
struct Walk {
    causes: Vec<Cause>,
    /// Violations of an unchanged (ratcheted) value, answered as warnings.
    warnings: Vec<String>,
}

/// Ratcheting state: whether the nearest correlated value (this node's, or an ancestor's when
/// this one does not correlate) is unchanged.
#[derive(Clone, Copy)]
struct Ratchet {
    unchanged: bool,
}

impl Ratchet {
    fn root(old: Option<&Value>, new: &Value) -> Self {
        Ratchet {
            unchanged: old == Some(new),
        }
    }

    /// Into a child: correlated when the old child exists, else the parent decides.
    fn child(self, parent_correlated: bool, old: Option<&Value>, new: &Value) -> Self {
        match old {
            Some(old) if parent_correlated => Ratchet {
                unchanged: old == new,
            },
            _ => self,
        }
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}

fn child_path(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

impl Walk {
    fn node(
        &mut self,
        schema: &Value,
        path: &str,
        new: &Value,
        old: Option<&Value>,
        ratchet: Ratchet,
    ) -> Result<(), Unsupported> {
        if new.is_null() {
            return Ok(());
        }
        let old = old.filter(|o| !o.is_null());
        self.rules(schema_rules(schema), schema, path, new, old, ratchet)?;
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for sub in all {
                self.rules(schema_rules(sub), schema, path, new, old, ratchet)?;
            }
        }
        match new {
            Value::Object(map) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|s| s.is_object());
                // Every map type Kubernetes defines (granular, atomic) correlates by key.
                let old_map = old.and_then(Value::as_object);
                for (key, value) in map {
                    let old_value = old_map.and_then(|m| m.get(key));
                    if let Some(child) = props.and_then(|p| p.get(key)) {
                        let next = ratchet.child(true, old_value, value);
                        self.node(child, &child_path(path, key), value, old_value, next)?;
                    } else if let Some(child) = additional {
                        let next = ratchet.child(true, old_value, value);
                        self.node(child, &format!("{path}[{key}]"), value, old_value, next)?;
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                    let old_items = old.and_then(Value::as_array);
                    let map_keys: Option<Vec<&str>> =
                        (schema.get("x-kubernetes-list-type").and_then(Value::as_str)
                            == Some("map"))
                        .then(|| {
                            schema["x-kubernetes-list-map-keys"]
                                .as_array()
                                .map(|k| k.iter().filter_map(Value::as_str).collect())
                                .unwrap_or_default()
                        });
                    for (i, item) in items.iter().enumerate() {
                        // Only map-type lists correlate items with the old list.
                        let old_item = match (&map_keys, old_items) {
                            (Some(keys), Some(olds)) => olds
                                .iter()
                                .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k))),
                            _ => None,
                        };
                        let next = ratchet.child(map_keys.is_some(), old_item, item);
                        self.node(item_schema, &format!("{path}[{i}]"), item, old_item, next)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn rules(
        &mut self,
        rules: Vec<Rule>,
        schema: &Value,
        path: &str,
        new: &Value,
        old: Option<&Value>,
        ratchet: Ratchet,
    ) -> Result<(), Unsupported> {
        if rules.is_empty() {
            return Ok(());
        }
        let unsupported = |rule: &Rule, why: String| Unsupported {
            path: display_path(path),
            rule: rule.rule.clone(),
            why,
        };
        let this = to_cel(new, Some(schema));
        let previous = old.map(|o| to_cel(o, Some(schema)));
        let schema_type = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for rule in rules {
            let compiled = compiled(&rule.rule).map_err(|e| unsupported(&rule, e))?;
            if compiled.uses_old_self && previous.is_none() && !rule.optional_old_self {
                // Transition rules run only when there is an old value to compare with.
                continue;
            }
            let mut scope = root().new_inner_scope();
            scope.add_variable_from_value("self", this.clone());
            scope.add_variable_from_value("oldSelf", previous.clone().unwrap_or(Cel::Null));
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                Cel::resolve(&compiled.expression, &scope)
            }))
            .map_err(|_| unsupported(&rule, "the evaluator panicked".to_string()))?;
            let passed = match outcome {
                Ok(Cel::Bool(b)) => b,
                Ok(other) => {
                    return Err(unsupported(
                        &rule,
                        format!("evaluated to {other:?}, not a bool"),
                    ))
                }
                Err(e) => match runtime_error_text(&e) {
                    Some(text) => {
                        self.causes.push(Cause {
                            reason: "FieldValueInvalid".into(),
                            message: format!(
                                "Invalid value: {schema_type:?}: {text} evaluating rule: {}",
                                rule.error_string()
                            ),
                            field: display_path(path),
                        });
                        continue;
                    }
                    None => return Err(unsupported(&rule, format!("evaluation failed: {e}"))),
                },
            };
            if passed {
                continue;
            }
            let detail = match &rule.message_expression {
                Some(expression) => message_expression(expression, &scope)
                    .map_err(|why| unsupported(&rule, why))?
                    .unwrap_or_else(|| rule.message_or_default()),
                None => rule.message_or_default(),
            };
            let field = match &rule.field_path {
                Some(fp) => child_path(path, &normalize_field_path(fp)),
                None => display_path(path),
            };
            // Kubernetes shows the value of a scalar, never of an object or a list.
            let value = match schema_type {
                "object" | "array" => BadValue::Omit,
                _ => BadValue::of(new),
            };
            let cause = cause_for_reason(rule.reason.as_deref(), field, value, &detail);
            if !compiled.uses_old_self && ratchet.unchanged {
                // An unchanged invalid value is ratcheted: a warning, not an error.
                self.warnings.push(super::status::cause_text(&cause));
            } else {
                self.causes.push(cause);
            }
        }
        Ok(())
    }
}

/// Evaluates a `messageExpression`; `Ok(None)` when it fails at runtime or yields an empty or
/// multi-line string (Kubernetes then falls back to the message).
fn message_expression(expression: &str, scope: &Context) -> Result<Option<String>, String> {
    let compiled = compiled(expression).map_err(|e| format!("messageExpression: {e}"))?;
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        Cel::resolve(&compiled.expression, scope)
    }))
    .map_err(|_| "messageExpression: the evaluator panicked".to_string())?;
    Ok(match outcome {
        Ok(Cel::String(s)) => {
            let trimmed = s.trim();
            (!trimmed.is_empty() && !trimmed.contains('\n')).then(|| trimmed.to_string())
        }
        Ok(other) => return Err(format!("messageExpression evaluated to {other:?}")),
        Err(_) => None,
    })
}

/// The text of a runtime error kube-apiserver raises too, or `None` for one only an incomplete
/// evaluator would hit.
fn runtime_error_text(e: &ExecutionError) -> Option<String> {
    match e {
        ExecutionError::NoSuchKey(k) => Some(format!("no such key: {k}")),
        ExecutionError::DivisionByZero(_) => Some("division by zero".into()),
        ExecutionError::RemainderByZero(_) => Some("modulus by zero".into()),
        ExecutionError::Overflow(..) => Some("integer overflow".into()),
        ExecutionError::FunctionError { function, message }
            if RUNTIME_ERROR_FUNCTIONS.contains(&function.as_str()) =>
        {
            Some(message.clone())
        }
        _ => None,
    }
}

/// `.a.b` or `['a'].b` → `a.b` (a rule's `fieldPath`, relative to the rule's place).
fn normalize_field_path(field_path: &str) -> String {
    let mut out = Vec::new();
    let mut rest = field_path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']").unwrap_or(r.len());
            out.push(r[..end].to_string());
            rest = r.get(end + 2..).unwrap_or("");
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(r[..end].to_string());
            rest = &r[end..];
        } else {
            out.push(rest.to_string());
            break;
        }
    }
    out.join(".")
}

/// Kubernetes' `fieldErrorForReason`, formatted as `field.Error.ErrorBody` prints it.
fn cause_for_reason(reason: Option<&str>, field: String, value: BadValue, detail: &str) -> Cause {
    let error = match reason {
        Some("FieldValueForbidden") => FieldError::forbidden(&field, detail),
        Some("FieldValueRequired") => FieldError::required(&field, detail),
        Some("FieldValueDuplicate") => FieldError::duplicate(&field, value),
        _ => FieldError::invalid(&field, value, detail),
    };
    error.to_cause()
}

/// Rules the servers of this process could not evaluate, by schema (see [`record_failure`]).
fn failures() -> &'static Mutex<Vec<(usize, String)>> {
    static FAILURES: OnceLock<Mutex<Vec<(usize, String)>>> = OnceLock::new();
    FAILURES.get_or_init(Default::default)
}

/// Remembers that a rule of `schema` could not be evaluated, for [`take_failures`].
pub fn record_failure(schema: &Arc<Value>, failure: &Unsupported) {
    if let Ok(mut f) = failures().lock() {
        f.push((Arc::as_ptr(schema) as usize, failure.to_string()));
    }
}

/// The recorded failures of `schema`, removed from the record.
pub fn take_failures(schema: &Arc<Value>) -> Vec<String> {
    let key = Arc::as_ptr(schema) as usize;
    let Ok(mut f) = failures().lock() else {
        return Vec::new();
    };
    let (mine, others): (Vec<_>, Vec<_>) = f.drain(..).partition(|(k, _)| *k == key);
    *f = others;
    mine.into_iter().map(|(_, text)| text).collect()
}
