package replicator

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Raft peer certificates: how a certificate names the node it was issued
// to, how a connection's peer is authenticated from it, and the cluster CA
// that `greffe cluster certs` makes (docs/CLUSTER.md, "Securing the raft
// port").
//
// # Node identity
//
// A member's certificate names its node id in exactly one URI SAN:
//
//	urn:greffe:node:<id>
//
// with <id> path-escaped (url.PathEscape; ids are 1 to 64 printable
// characters without spaces or slashes, so "n1" stays "n1"). The common
// name is set to the id too, for people reading the certificate; it is
// never read. A certificate without such a URI, or with two, names no node
// and is refused on the raft port. The IP and DNS SANs name the hosts the
// member's peers dial, checked the usual way by whoever dials.

// nodeURIPrefix starts the URI SAN that names a member's node id.
const nodeURIPrefix = "urn:greffe:node:"

// NodeURI is the URI SAN a member's raft certificate carries.
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: "urn", Opaque: strings.TrimPrefix(nodeURIPrefix, "urn:") + url.PathEscape(id)}
}

// Refusal codes of the raft port's authentication. They are part of the
// public contract (docs/CLUSTER.md): never renamed, never reused. An RPC
// refused with one is answered with an error that starts with the code,
// and logged (at most once a minute per sender).
const (
	// CodeRaftPeerNoNodeID: a TLS peer's certificate names no node id (or
	// several): the connection is refused at the handshake.
	CodeRaftPeerNoNodeID = "raft_peer_without_node_id"
	// CodeRaftPeerWrongNode: the peer this node dialled presented the
	// certificate of another node than the member it meant to reach.
	CodeRaftPeerWrongNode = "raft_peer_wrong_node"
	// CodeRaftSenderAnonymous: the RPC names no sender (RPCHeader.ID).
	CodeRaftSenderAnonymous = "raft_sender_anonymous"
	// CodeRaftSenderMismatch: the RPC names another sender than the node
	// id in the certificate of the connection it came on.
	CodeRaftSenderMismatch = "raft_sender_mismatch"
	// CodeRaftSenderIsSelf: the RPC claims to come from this node, which
	// never sends RPCs to itself.
	CodeRaftSenderIsSelf = "raft_sender_is_self"
	// CodeRaftSenderNotMember: the RPC's sender is not a member (voter or
	// non-voter) of this node's latest configuration: a stranger, or a
	// removed member.
	CodeRaftSenderNotMember = "raft_sender_not_member"
)

// NodeIDOf returns the node id that cert names in its URI SAN.
func NodeIDOf(cert *x509.Certificate) (string, error) {
	var ids []string
	for _, u := range cert.URIs {
		if u.Scheme != "urn" || !strings.HasPrefix(u.Opaque, strings.TrimPrefix(nodeURIPrefix, "urn:")) {
			continue
		}
		id, err := url.PathUnescape(strings.TrimPrefix(u.Opaque, strings.TrimPrefix(nodeURIPrefix, "urn:")))
		if err != nil || !validNodeID(id) {
			return "", fmt.Errorf("%s: certificate %q names node %q, which is no valid node id", CodeRaftPeerNoNodeID, cert.Subject.CommonName, u.String())
		}
		ids = append(ids, id)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%s: certificate %q names no node id (a URI SAN %s<id>; greffe cluster certs issues such certificates)",
			CodeRaftPeerNoNodeID, cert.Subject.CommonName, nodeURIPrefix)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%s: certificate %q names several node ids %v; issue one certificate per node", CodeRaftPeerNoNodeID, cert.Subject.CommonName, ids)
}

// peerNodeID returns the node id of the peer of a TLS connection: its
// leaf certificate's.
func peerNodeID(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", fmt.Errorf("%s: the peer presented no certificate", CodeRaftPeerNoNodeID)
	}
	return NodeIDOf(cs.PeerCertificates[0])
}

// verifyPeerNode is the VerifyConnection of every raft TLS connection, in
// and out (it runs after the chain was verified against the cluster CA):
// the peer's certificate must name a node id.
func verifyPeerNode(cs tls.ConnectionState) error {
	_, err := peerNodeID(cs)
	return err
}

// ownNodeID returns the node id this node's certificate in tc names.
func ownNodeID(tc *tls.Config) (string, error) {
	if len(tc.Certificates) == 0 || len(tc.Certificates[0].Certificate) == 0 {
		return "", errors.New("no certificate")
	}
	leaf := tc.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(tc.Certificates[0].Certificate[0]); err != nil {
			return "", err
		}
	}
	return NodeIDOf(leaf)
}

// Certificate lifetimes of greffe cluster certs.
const (
	// DefaultCAValidity is the cluster CA's lifetime: ten years, so that
	// members added later get certificates of the same CA.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultPeerValidity is a member certificate's lifetime: two years
	// (docs/OPERATIONS.md says how to rotate them without downtime).
	DefaultPeerValidity = 2 * 365 * 24 * time.Hour
)

// PeerCA is a cluster CA: it signs the members' raft certificates.
type PeerCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

// NewPeerCA makes a CA valid from now for validity.
func NewPeerCA(now time.Time, validity time.Duration) (*PeerCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "greffe cluster CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &PeerCA{cert: cert, key: key, der: der}, nil
}

// LoadPeerCA reads a CA greffe cluster certs wrote (PEM certificate and
// PKCS #8 key).
func LoadPeerCA(certPEM, keyPEM []byte) (*PeerCA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, errors.New("cluster CA: not a CA certificate with an ECDSA key")
	}
	return &PeerCA{cert: cert, key: key, der: pair.Certificate[0]}, nil
}

// PEM returns the CA's certificate and key as PEM.
func (ca *PeerCA) PEM() (certPEM, keyPEM []byte, err error) {
	kb, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

// IssuePeer issues node id's raft certificate, for server and client
// authentication: its node id in the URI SAN, hosts (IP addresses or DNS
// names, the ones its peers dial) as IP and DNS SANs. It returns the
// certificate and its key as PEM.
func (ca *PeerCA) IssuePeer(id string, hosts []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if !validNodeID(id) {
		return nil, nil, fmt.Errorf("node id %q: use 1 to 64 printable characters without spaces or slashes", id)
	}
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("node %s: name at least one host its peers dial", id)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: id},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		URIs:        []*url.URL{NodeURI(id)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// PeerTLS builds Config.TLS from PEM files: this node's certificate and key,
// and the cluster CA that signs every member's certificate. Certificates
// must name the raft addresses peers dial (IP or DNS SANs) and the node id
// (NodeURI); the peer of every connection, in and out, must present one
// that the CA signed and that names a node id.
func PeerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft tls: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("raft tls: %s holds no PEM certificate", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
		VerifyConnection: verifyPeerNode}, nil
}

// PeerSpec names a member to issue a certificate for: its node id and the
// hosts (IP addresses or DNS names) its peers dial.
type PeerSpec struct {
	ID    string   `json:"id"`
	Hosts []string `json:"hosts"`
}

// ClusterCertsConfig says what WriteClusterCerts writes.
type ClusterCertsConfig struct {
	// Dir receives the files; created (0700) when missing. When it holds
	// ca.pem and ca.key already, that CA signs the new certificates (a
	// member added later); otherwise a new CA is made.
	Dir string
	// Nodes are the members to issue certificates for; at least one.
	Nodes []PeerSpec
	// CAValidity and PeerValidity are the lifetimes of a new CA and of the
	// member certificates. Zero: DefaultCAValidity, DefaultPeerValidity.
	CAValidity, PeerValidity time.Duration
	// Now is the issue time. Zero: time.Now().
	Now time.Time
}

// ClusterCerts says what WriteClusterCerts wrote.
type ClusterCerts struct {
	// CACert and CAKey are the CA's files; NewCA says whether it was made
	// now.
	CACert string `json:"ca_cert"`
	CAKey  string `json:"ca_key"`
	NewCA  bool   `json:"new_ca"`
	// Nodes are the members' files, in the order asked.
	Nodes []PeerFiles `json:"nodes"`
}

// PeerFiles are one member's certificate and key files.
type PeerFiles struct {
	ID    string   `json:"id"`
	Hosts []string `json:"hosts"`
	Cert  string   `json:"cert"`
	Key   string   `json:"key"`
}

// File names in ClusterCertsConfig.Dir.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca.key"
)

// WriteClusterCerts issues the raft certificates of a cluster into
// cfg.Dir: the CA (ca.pem, ca.key) unless the folder holds one, and for
// each node ID.pem and ID.key. Keys are written 0600, and never over an
// existing file: everything is checked before anything is written, and a
// refusal writes nothing.
func WriteClusterCerts(cfg ClusterCertsConfig) (ClusterCerts, error) {
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	if cfg.CAValidity == 0 {
		cfg.CAValidity = DefaultCAValidity
	}
	if cfg.PeerValidity == 0 {
		cfg.PeerValidity = DefaultPeerValidity
	}
	var problems []error
	if cfg.Dir == "" {
		problems = append(problems, errors.New("name the folder to write the certificates to"))
	}
	if len(cfg.Nodes) == 0 {
		problems = append(problems, errors.New("name at least one node (ID=HOST)"))
	}
	if cfg.CAValidity < 0 || cfg.PeerValidity < 0 {
		problems = append(problems, errors.New("validity must be positive"))
	}
	join := func(name string) string { return filepath.Join(cfg.Dir, name) }
	out := ClusterCerts{CACert: join(caCertFile), CAKey: join(caKeyFile)}
	seen := map[string]bool{}
	for _, n := range cfg.Nodes {
		switch {
		case !validNodeID(n.ID):
			problems = append(problems, fmt.Errorf("node id %q: use 1 to 64 printable characters without spaces or slashes", n.ID))
			continue
		case seen[n.ID]:
			problems = append(problems, fmt.Errorf("node %s named twice", n.ID))
			continue
		case len(n.Hosts) == 0:
			problems = append(problems, fmt.Errorf("node %s: name at least one host its peers dial", n.ID))
		}
		seen[n.ID] = true
		pf := PeerFiles{ID: n.ID, Hosts: n.Hosts, Cert: join(n.ID + ".pem"), Key: join(n.ID + ".key")}
		for _, f := range []string{pf.Cert, pf.Key} {
			if _, err := os.Lstat(f); err == nil {
				problems = append(problems, fmt.Errorf("%s exists: certificates and keys are never overwritten; remove it, or write to another folder", f))
			}
		}
		out.Nodes = append(out.Nodes, pf)
	}
	_, certErr := os.Lstat(out.CACert)
	_, keyErr := os.Lstat(out.CAKey)
	haveCA := certErr == nil && keyErr == nil
	if (certErr == nil) != (keyErr == nil) {
		problems = append(problems, fmt.Errorf("%s holds only one of %s and %s: give both (to issue with that CA) or neither (a new CA)", cfg.Dir, caCertFile, caKeyFile))
	}
	if len(problems) > 0 {
		return ClusterCerts{}, errors.Join(problems...)
	}
	var ca *PeerCA
	var err error
	if haveCA {
		certPEM, err1 := os.ReadFile(out.CACert)
		keyPEM, err2 := os.ReadFile(out.CAKey)
		if err := errors.Join(err1, err2); err != nil {
			return ClusterCerts{}, err
		}
		if ca, err = LoadPeerCA(certPEM, keyPEM); err != nil {
			return ClusterCerts{}, err
		}
	} else if ca, err = NewPeerCA(cfg.Now, cfg.CAValidity); err != nil {
		return ClusterCerts{}, err
	}
	// Issue everything before writing anything.
	type issued struct{ cert, key []byte }
	certs := make([]issued, len(out.Nodes))
	for i, pf := range out.Nodes {
		c, k, err := ca.IssuePeer(pf.ID, pf.Hosts, cfg.Now, cfg.PeerValidity)
		if err != nil {
			return ClusterCerts{}, err
		}
		certs[i] = issued{c, k}
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return ClusterCerts{}, err
	}
	if !haveCA {
		c, k, err := ca.PEM()
		if err != nil {
			return ClusterCerts{}, err
		}
		if err := errors.Join(writeNewFile(out.CAKey, k, 0o600), writeNewFile(out.CACert, c, 0o644)); err != nil {
			return ClusterCerts{}, err
		}
		out.NewCA = true
	}
	for i, pf := range out.Nodes {
		if err := errors.Join(writeNewFile(pf.Key, certs[i].key, 0o600), writeNewFile(pf.Cert, certs[i].cert, 0o644)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// writeNewFile writes data to path, which must not exist, with perm, and
// syncs it.
func writeNewFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
