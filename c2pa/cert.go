package c2pa

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/crux-go/crux/internal/keyfile"
	"github.com/crux-go/crux/receipts"
)

// File names of the local root CA in the directory given to
// [LoadOrCreateCA].
const (
	CAKeyFileName  = "c2pa-ca.key" // the CA's Ed25519 private key, PKCS #8 PEM, mode 0600
	CACertFileName = "c2pa-ca.pem" // the CA's self-signed certificate, PEM, mode 0600
)

// Lifetimes of the certificates.
const (
	caLifetime   = 20 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	// leafRenewal is how long before its end a cached leaf is replaced.
	leafRenewal = 30 * 24 * time.Hour
	// clockSkew backdates NotBefore, for verifiers whose clock is behind.
	clockSkew = time.Hour
)

// Extended key usages C2PA accepts for a signing certificate.
var (
	oidDocumentSigning = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 36}
	oidKeyUsage        = asn1.ObjectIdentifier{2, 5, 29, 15}
)

// CA is a local root certificate authority. It certifies the Ed25519 keys
// that sign manifests (the server's receipt key) with leaf certificates
// that meet the C2PA signing-credential profile: X.509 v3, basic
// constraints CA:FALSE, a critical key usage of digitalSignature, the
// extended key usages emailProtection and documentSigning, subject and
// authority key identifiers. Validators reject a self-signed signing
// certificate, hence the two levels. A CA is safe for concurrent use.
type CA struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey

	mu     sync.Mutex
	leaves map[string]*x509.Certificate // by public key
}

// NewCA returns a CA with a fresh key and certificate, held in memory
// only, valid from now.
func NewCA(now time.Time) (*CA, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("c2pa: new CA key: %w", err)
	}
	der, err := selfSign(key, now)
	if err != nil {
		return nil, err
	}
	return newCA(der, key)
}

func newCA(der []byte, key ed25519.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("c2pa: CA certificate: %w", err)
	}
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("c2pa: the CA certificate does not certify the CA key")
	}
	if !cert.IsCA {
		return nil, errors.New("c2pa: the CA certificate is not a CA certificate")
	}
	return &CA{cert: cert, key: key, leaves: map[string]*x509.Certificate{}}, nil
}

// selfSign returns the DER of the root certificate for key.
func selfSign(key ed25519.PrivateKey, now time.Time) ([]byte, error) {
	pub := key.Public().(ed25519.PublicKey)
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "crux local C2PA root " + hex.EncodeToString(keyID(pub)[:8]),
			Organization: []string{"crux"},
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(pub),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("c2pa: CA certificate: %w", err)
	}
	return der, nil
}

// keyID is the subject key identifier of pub: the first 20 bytes of its
// SHA-256.
func keyID(pub ed25519.PublicKey) []byte {
	sum := sha256.Sum256(pub)
	return sum[:20]
}

func newSerial() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("c2pa: serial number: %w", err)
	}
	b[0] &= 0x7f
	b[0] |= 0x01 // positive and never zero
	return new(big.Int).SetBytes(b), nil
}

// Certificate returns the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertificatePEM returns the CA's certificate as PEM, the form a verifier
// is given as trust anchor.
func (ca *CA) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// Roots returns a pool holding the CA's certificate.
func (ca *CA) Roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Chain returns the certificate chain that signs a manifest with the
// Ed25519 key pub at now: a leaf certifying pub, issued by the CA, then
// the CA's certificate (DER each). A leaf is valid for a year (never past
// the CA) and is reused, from memory, until 30 days before its end.
func (ca *CA) Chain(pub ed25519.PublicKey, now time.Time) ([][]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("c2pa: public key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if now.After(ca.cert.NotAfter) || now.Before(ca.cert.NotBefore) {
		return nil, fmt.Errorf("c2pa: the CA certificate is valid from %s to %s, not at %s",
			ca.cert.NotBefore.Format(time.RFC3339), ca.cert.NotAfter.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	leaf := ca.leaves[string(pub)]
	if ca.renew(leaf, now) {
		var err error
		if leaf, err = ca.issue(pub, now); err != nil {
			return nil, err
		}
		ca.leaves[string(pub)] = leaf
	}
	return [][]byte{bytes.Clone(leaf.Raw), bytes.Clone(ca.cert.Raw)}, nil
}

// renew reports whether leaf must be replaced at now: missing, not yet
// valid, expired, or within leafRenewal of its end when a new one would
// last longer.
func (ca *CA) renew(leaf *x509.Certificate, now time.Time) bool {
	switch {
	case leaf == nil, now.Before(leaf.NotBefore), !now.Before(leaf.NotAfter):
		return true
	}
	return !now.Before(leaf.NotAfter.Add(-leafRenewal)) && leaf.NotAfter.Before(ca.cert.NotAfter)
}

// issue makes a leaf certificate for pub.
func (ca *CA) issue(pub ed25519.PublicKey, now time.Time) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafLifetime)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "crux receipt key " + receipts.Fingerprint(pub),
			Organization: []string{"crux"},
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection},
		UnknownExtKeyUsage:    []asn1.ObjectIdentifier{oidDocumentSigning},
		BasicConstraintsValid: true,
		IsCA:                  false,
		SubjectKeyId:          keyID(pub),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("c2pa: leaf certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}

// LoadOrCreateCA returns the CA whose key and certificate are stored in
// dir (CAKeyFileName and CACertFileName), creating dir (0700) and either
// file first if it is missing. Both files are written mode 0600 to a
// temporary file, flushed to disk and hard-linked into place, which never
// replaces an existing file: processes racing to create them end up with
// the files of whichever linked first. An existing key file that group or
// others may access, or whose content is not a PKCS #8 Ed25519 key, is an
// error naming it, and so is a certificate that does not certify the key
// or has expired; neither file is then touched.
func LoadOrCreateCA(dir string, now time.Time) (*CA, error) {
	if dir == "" {
		return nil, errors.New("c2pa: CA directory is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("c2pa: CA directory: %w", err)
	}
	keyPath := filepath.Join(dir, CAKeyFileName)
	key, err := loadCAKey(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		_, fresh, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			return nil, fmt.Errorf("c2pa: new CA key: %w", gerr)
		}
		der, merr := x509.MarshalPKCS8PrivateKey(fresh)
		if merr != nil {
			return nil, fmt.Errorf("c2pa: new CA key: %w", merr)
		}
		content := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		if err := createCAFile(dir, CAKeyFileName, content); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		key, err = loadCAKey(keyPath) // ours, or the one another process linked first
	}
	if err != nil {
		return nil, err
	}
	certPath := filepath.Join(dir, CACertFileName)
	ca, err := loadCACert(certPath, key)
	if errors.Is(err, fs.ErrNotExist) {
		der, serr := selfSign(key, now)
		if serr != nil {
			return nil, serr
		}
		content := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := createCAFile(dir, CACertFileName, content); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		ca, err = loadCACert(certPath, key)
	}
	if err != nil {
		return nil, err
	}
	if now.After(ca.cert.NotAfter) {
		return nil, fmt.Errorf("c2pa: the CA certificate %s expired at %s; move %s and %s away to create a new CA "+
			"(manifests signed under the old one then verify only with the old certificate)",
			certPath, ca.cert.NotAfter.Format(time.RFC3339), certPath, keyPath)
	}
	return ca, nil
}

// maxPEMFile bounds the CA files read.
const maxPEMFile = 64 << 10

// readSmall reads a file of at most maxPEMFile bytes, checking that it is
// a regular file and, when private, that only its owner may access it.
func readSmall(path string, private bool) ([]byte, error) {
	b, err := keyfile.Read(path, maxPEMFile+1, private)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("c2pa: %w", err)
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("c2pa: %s is larger than %d bytes", path, maxPEMFile)
	}
	return b, nil
}

func loadCAKey(path string) (ed25519.PrivateKey, error) {
	b, err := readSmall(path, true)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("c2pa: %s is not a PEM PRIVATE KEY; it is left as it is", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("c2pa: %s: %w; it is left as it is", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("c2pa: %s holds a %T, not an Ed25519 key; it is left as it is", path, k)
	}
	return key, nil
}

func loadCACert(path string, key ed25519.PrivateKey) (*CA, error) {
	b, err := readSmall(path, false)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("c2pa: %s is not a PEM CERTIFICATE; it is left as it is", path)
	}
	ca, err := newCA(blk.Bytes, key)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return ca, nil
}

// createCAFile creates dir/name once (see keyfile.Create); an error wraps
// fs.ErrExist when the file exists already.
func createCAFile(dir, name string, content []byte) error {
	err := keyfile.Create(dir, name, content)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("c2pa: %w", err)
	}
	return err
}

// ParseRoots reads trust anchors: one or more PEM CERTIFICATE blocks.
func ParseRoots(pemBytes []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := pemBytes; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("c2pa: trust anchor %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("c2pa: no PEM CERTIFICATE block among the trust anchors")
	}
	return pool, nil
}
