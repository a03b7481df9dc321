#!/usr/bin/env bash
# Regenerates the DEVELOPMENT-ONLY CA and server certificate in this directory.
#
#   ca.crt / ca.key    self-signed CA ("machine-config-server development CA")
#   tls.crt / tls.key  server certificate for localhost, 127.0.0.1 and ::1, signed by the CA
#
# ECDSA P-256 keys (PKCS#8), SHA-256 signatures, valid for 10 years. Needs only the openssl CLI.
# Never use these files outside development and tests: the private keys are public.
set -euo pipefail

cd "$(dirname "$0")"

DAYS=3650
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/ca.key"
openssl req -x509 -new -sha256 -days "$DAYS" \
  -key "$work/ca.key" \
  -subj "/O=machine-config-server development/CN=machine-config-server development CA" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -addext "subjectKeyIdentifier=hash" \
  -out "$work/ca.crt"

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/tls.key"
openssl req -new -sha256 -key "$work/tls.key" \
  -subj "/O=machine-config-server development/CN=localhost" \
  -out "$work/tls.csr"

cat > "$work/server.ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EXT

openssl x509 -req -sha256 -days "$DAYS" \
  -in "$work/tls.csr" \
  -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -extfile "$work/server.ext" \
  -out "$work/tls.crt"

# Check the chain before replacing anything.
openssl verify -CAfile "$work/ca.crt" "$work/tls.crt" >/dev/null

install -m 0644 "$work/ca.crt" ca.crt
install -m 0600 "$work/ca.key" ca.key
install -m 0644 "$work/tls.crt" tls.crt
# 0644 so a container running as another user can read the development key; it is not secret.
install -m 0644 "$work/tls.key" tls.key

echo "wrote $(pwd)/{ca.crt,ca.key,tls.crt,tls.key}, valid until $(openssl x509 -noout -enddate -in tls.crt | cut -d= -f2)"
