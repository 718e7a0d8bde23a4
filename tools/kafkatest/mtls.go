package kafkatest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
)

// ClientCert is a PEM client certificate and its private key, for mutual
// TLS.
type ClientCert struct {
	CertFile, KeyFile string
}

// MTLSCerts are the client certificates `kafka.sh start --secure` made for
// the mutual-TLS listener, and the key of the CA the brokers trust.
type MTLSCerts struct {
	// Admin has CN=admin: the super user User:admin.
	Admin ClientCert
	// App has CN=eosflow-app: User:eosflow-app, which holds no ACL
	// unless a test grants one.
	App ClientCert
	// Untrusted has CN=admin but was signed by a CA the brokers do not
	// trust: they must refuse it.
	Untrusted ClientCert
	// CAKeyFile is the private key of the CA in Env.TLS.CAFile, so
	// Env.AsCert can sign certificates for new principals.
	CAKeyFile string
}

// SecureMTLS returns the mutual-TLS listener of the secured cluster
// described by the file in EOS_KAFKA_SECURE_ENV, connecting as the super
// user by its client certificate alone (no SASL), and skips t when the
// variable is unset. A file without the listener's lines comes from a
// broker started by an older kafka.sh: t fails, asking for a restart.
func SecureMTLS(t testing.TB) *Env {
	t.Helper()
	path := os.Getenv(EnvSecure)
	if path == "" {
		t.Skipf("%s is not set; start a secured broker with `EOS_KAFKA_PORT=19600 integration/kafka/kafka.sh start --secure` and set %s to the secure.env file it prints (its mutual-TLS listener is on port+20000)", EnvSecure, EnvSecure)
	}
	vars, err := readEnvFile(path)
	if err != nil {
		t.Fatalf("%s: %v", EnvSecure, err)
	}
	need := []string{"EOS_KAFKA_MTLS_BROKERS", "EOS_TLS_CA_FILE", "EOS_KAFKA_MTLS_CERT_FILE", "EOS_KAFKA_MTLS_KEY_FILE",
		"EOS_KAFKA_CA_KEY_FILE", "EOS_KAFKA_APP_CERT_FILE", "EOS_KAFKA_APP_KEY_FILE",
		"EOS_KAFKA_UNTRUSTED_CERT_FILE", "EOS_KAFKA_UNTRUSTED_KEY_FILE"}
	var missing []string
	for _, k := range need {
		if vars[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s=%s lacks %s: the broker was started by a kafka.sh without the mutual-TLS listener; restart it with `integration/kafka/kafka.sh restart` (it adds the listener and the client certificates) and use the secure.env it prints", EnvSecure, path, strings.Join(missing, ", "))
	}
	certs := &MTLSCerts{
		Admin:     ClientCert{vars["EOS_KAFKA_MTLS_CERT_FILE"], vars["EOS_KAFKA_MTLS_KEY_FILE"]},
		App:       ClientCert{vars["EOS_KAFKA_APP_CERT_FILE"], vars["EOS_KAFKA_APP_KEY_FILE"]},
		Untrusted: ClientCert{vars["EOS_KAFKA_UNTRUSTED_CERT_FILE"], vars["EOS_KAFKA_UNTRUSTED_KEY_FILE"]},
		CAKeyFile: vars["EOS_KAFKA_CA_KEY_FILE"],
	}
	brokers := strings.Split(vars["EOS_KAFKA_MTLS_BROKERS"], ",")
	e := &Env{Brokers: brokers, Certs: certs, TLS: config.TLS{Enabled: true, CAFile: vars["EOS_TLS_CA_FILE"]}}
	e = e.WithClientCert(certs.Admin)
	t.Logf("secured broker, mutual TLS: %s as %s", strings.Join(brokers, ","), certs.Admin.CertFile)
	return e
}

// WithClientCert returns a copy of e that presents c on the TLS
// handshake; a zero c presents none.
func (e *Env) WithClientCert(c ClientCert) *Env {
	cp := *e
	cp.TLS.CertFile, cp.TLS.KeyFile = c.CertFile, c.KeyFile
	return &cp
}

// AsCert returns a copy of e that authenticates by a new client
// certificate with CN=cn, which the brokers map to the principal User:cn.
// The CA of a SecureMTLS Env signs it, in a directory removed when t ends.
func (e *Env) AsCert(t testing.TB, cn string) *Env {
	t.Helper()
	if e.Certs == nil || e.Certs.CAKeyFile == "" {
		t.Fatalf("AsCert(%q) needs an Env from SecureMTLS, which knows the CA key", cn)
	}
	c, err := SignClientCert(t.TempDir(), e.TLS.CAFile, e.Certs.CAKeyFile, cn)
	if err != nil {
		t.Fatalf("client certificate for CN=%s: %v", cn, err)
	}
	return e.WithClientCert(c)
}

// SignClientCert writes to dir a client certificate with CN=cn, valid for
// a day and signed by the CA in caCertFile with the key in caKeyFile (PEM,
// PKCS#8, PKCS#1 or SEC 1), and its new ECDSA P-256 key.
func SignClientCert(dir, caCertFile, caKeyFile, cn string) (ClientCert, error) {
	ca, err := readPEMCert(caCertFile)
	if err != nil {
		return ClientCert{}, err
	}
	caKey, err := readPEMKey(caKeyFile)
	if err != nil {
		return ClientCert{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ClientCert{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return ClientCert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		// An hour back tolerates a clock that is a little behind the broker's.
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return ClientCert{}, fmt.Errorf("sign with %s: %w", caKeyFile, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return ClientCert{}, err
	}
	c := ClientCert{CertFile: filepath.Join(dir, cn+".crt"), KeyFile: filepath.Join(dir, cn+".key")}
	if err := os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return ClientCert{}, err
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return ClientCert{}, err
	}
	return c, nil
}

// readPEMCert reads the first certificate of a PEM file.
func readPEMCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// readPEMKey reads the first private key of a PEM file, as openssl and Go
// write them.
func readPEMKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s holds no PEM private key", path)
		}
		var key any
		switch blk.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, errors.New(path + ": the key cannot sign")
		}
		return s, nil
	}
}
