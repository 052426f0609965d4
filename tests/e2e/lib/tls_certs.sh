# Test certificates made with openssl at test time. Sourced, not run.
#
#   tls_make_ca DIR NAME                        DIR/NAME.crt, DIR/NAME.key
#   tls_make_cert DIR CA NAME server|client [START END]
#       DIR/NAME.crt and DIR/NAME.key signed by DIR/CA; a server certificate
#       names localhost and 127.0.0.1. START and END (YYYYMMDDHHMMSSZ) set
#       the validity, e.g. a period in the past for an expired certificate.

tls_make_ca() {
  local dir=$1 name=$2
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj "/CN=Tessera test CA $name" -keyout "$dir/$name.key" -out "$dir/$name.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
}

tls_make_cert() {
  local dir=$1 ca=$2 name=$3 kind=$4
  local start=${5:-} end=${6:-}
  local db="$dir/$ca.db"
  mkdir -p "$db"
  touch "$db/index.txt"
  [[ -f "$db/serial" ]] || echo 1000 >"$db/serial"
  local ext
  if [[ $kind == server ]]; then
    ext="subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
  else
    ext="extendedKeyUsage=clientAuth"
  fi
  cat >"$db/openssl.cnf" <<CNF
[ca]
default_ca = test_ca
[test_ca]
database = $db/index.txt
serial = $db/serial
new_certs_dir = $db
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[any]
commonName = supplied
[leaf]
basicConstraints = CA:FALSE
$ext
CNF
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  local dates=(-days 30)
  [[ -n $start ]] && dates=(-startdate "$start" -enddate "$end")
  openssl ca -batch -config "$db/openssl.cnf" -extensions leaf -cert "$dir/$ca.crt" \
    -keyfile "$dir/$ca.key" "${dates[@]}" -in "$dir/$name.csr" -out "$dir/$name.crt" \
    -notext 2>/dev/null
}
