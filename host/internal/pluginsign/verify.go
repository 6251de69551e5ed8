package pluginsign

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// Why a verification failed. Each error returned by Verify wraps one of
// them and names the reference; ErrUnreachable alone says nothing about
// the artifact, and a caller retries rather than treating the plugin as
// tampered with.
var (
	// ErrNoSignature: the artifact has no signature (no signature tag, or
	// no signature layer in it).
	ErrNoSignature = errors.New("no signature")
	// ErrDigestMismatch: the signatures there are over another digest.
	ErrDigestMismatch = errors.New("signature over another digest")
	// ErrBadSignature: no signature verifies against the keys (or the
	// trusted root) asked for: a wrong key, a tampered payload.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrIdentityMismatch: a keyless signature verifies, but its
	// certificate's issuer and subject match none of the identities.
	ErrIdentityMismatch = errors.New("certificate identity does not match")
	// ErrUnreachable: the registry could not be asked (network, TLS,
	// credentials, a server error); transient.
	ErrUnreachable = errors.New("registry unreachable")
	// ErrSignatureRequired: the node's policy requires a signature and
	// neither it nor the plugin's manifest says whose.
	ErrSignatureRequired = errors.New("signature required")
	// ErrPolicy: a verification policy (a node policy or a manifest's
	// verification field) cannot be used.
	ErrPolicy = errors.New("invalid verification policy")
)

// Config configures a Verifier.
type Config struct {
	// Registry reaches the registry the artifacts are in.
	Registry *pluginoci.Client
	// Policy is the node's policy; nil means none.
	Policy *NodePolicy
}

// Verifier checks plugin artifacts' signatures against the node's policy
// and each plugin's own verification.
type Verifier struct {
	registry *pluginoci.Client
	policy   *NodePolicy
	node     *checker
}

// New returns a Verifier, or an error when the node policy's keys or
// trusted root cannot be read.
func New(cfg Config) (*Verifier, error) {
	if cfg.Registry == nil {
		return nil, errors.New("pluginsign: Config.Registry is nil")
	}
	v := &Verifier{registry: cfg.Registry, policy: cfg.Policy, node: &checker{}}
	if cfg.Policy != nil {
		c, err := newChecker(cfg.Policy.Verification, filepath.Dir(cfg.Policy.File), "node policy "+cfg.Policy.File)
		if err != nil {
			return nil, err
		}
		v.node = c
	}
	return v, nil
}

// Verify checks the signatures of the artifact ref: it must pass the
// node's verification (when the node policy lists any key or identity)
// and vf, the plugin manifest's own (when it lists any), whose relative
// paths are relative to manifestDir. A node policy with requireSignature
// refuses a plugin when neither lists anything. Errors wrap ErrNoSignature,
// ErrDigestMismatch, ErrBadSignature, ErrIdentityMismatch, ErrUnreachable,
// ErrSignatureRequired or ErrPolicy and name the reference.
func (v *Verifier) Verify(ctx context.Context, ref name.Digest, vf *abi.Verification, manifestDir string) error {
	plugin, err := newChecker(vf, manifestDir, "plugin manifest in "+manifestDir)
	if err != nil {
		return fmt.Errorf("verify %s: %w", ref, err)
	}
	var checks []*checker
	for _, c := range []*checker{v.node, plugin} {
		if !c.empty() {
			checks = append(checks, c)
		}
	}
	if len(checks) == 0 {
		if v.policy != nil && v.policy.RequireSignature {
			return fmt.Errorf("verify %s: %w by %s, none configured for plugin %s", ref, ErrSignatureRequired, v.policy.File, ref)
		}
		return nil
	}
	return verifyAll(ctx, ref, v.registry.RemoteOptions(ctx), checks)
}

// VerifyConfig says what VerifyRef checks.
type VerifyConfig struct {
	// Ref is the artifact, by digest.
	Ref name.Digest
	// Verification lists the keys and identities; relative paths are
	// relative to Dir.
	Verification *abi.Verification
	// Dir is the directory relative paths are relative to.
	Dir string
	// Remote are the registry options (pluginoci.Client.RemoteOptions).
	Remote []remote.Option
}

// VerifyRef checks that one of ref's signatures passes cfg.Verification,
// which must list a key or an identity: `wasmlet plugin verify`, with no
// node policy. Errors are those of Verifier.Verify.
func VerifyRef(ctx context.Context, cfg VerifyConfig) error {
	c, err := newChecker(cfg.Verification, cfg.Dir, "the verification asked for")
	if err != nil {
		return fmt.Errorf("verify %s: %w", cfg.Ref, err)
	}
	if c.empty() {
		return fmt.Errorf("verify %s: %w: no key and no keyless identity", cfg.Ref, ErrPolicy)
	}
	return verifyAll(ctx, cfg.Ref, cfg.Remote, []*checker{c})
}

// verifyAll reads ref's signatures once and requires each checker to
// accept one of them.
func verifyAll(ctx context.Context, ref name.Digest, opts []remote.Option, checks []*checker) error {
	tag := SignatureTag(ref)
	_, layers, err := readSignatures(tag, append(opts, remote.WithContext(ctx)))
	if err != nil {
		return fmt.Errorf("verify %s: %w", ref, err)
	}
	if len(layers) == 0 {
		return fmt.Errorf("verify %s: %w (no signature layer at %s)", ref, ErrNoSignature, tag)
	}
	for _, c := range checks {
		if err := c.check(ref, layers); err != nil {
			return fmt.Errorf("verify %s: %w", ref, err)
		}
	}
	return nil
}

// checker is one verification, resolved: its keys read, its identities
// and trusted root ready for sigstore-go.
type checker struct {
	origin     string // where the verification was written, for errors
	keys       []publicKey
	identities []verify.CertificateIdentity
	keyless    *verify.Verifier
}

func (c *checker) empty() bool { return len(c.keys) == 0 && len(c.identities) == 0 }

// newChecker resolves v, whose relative paths are relative to dir; origin
// names where v was written. Errors name origin and the field.
func newChecker(v *abi.Verification, dir, origin string) (*checker, error) {
	c := &checker{origin: origin}
	if v == nil {
		return c, nil
	}
	fail := func(field string, err error) (*checker, error) {
		return nil, fmt.Errorf("%w: %s: verification.%s: %v", ErrPolicy, origin, field, err)
	}
	for i, k := range v.Keys {
		src := k
		keyName := fmt.Sprintf("inline key %d", i)
		if !strings.HasPrefix(strings.TrimSpace(k), "-----BEGIN") {
			src = resolvePath(dir, k)
			keyName = src
		}
		pk, err := loadPublicKey(src, keyName)
		if err != nil {
			return fail(fmt.Sprintf("keys[%d]", i), err)
		}
		c.keys = append(c.keys, pk)
	}
	for i, id := range v.Keyless {
		field := fmt.Sprintf("keyless[%d]", i)
		if id.Issuer == "" {
			return fail(field+".issuer", errors.New("empty; the OIDC issuer is required"))
		}
		if (id.Subject == "") == (id.SubjectRegExp == "") {
			return fail(field, errors.New("exactly one of subject and subjectRegExp is required"))
		}
		if id.SubjectRegExp != "" {
			if _, err := regexp.Compile(id.SubjectRegExp); err != nil {
				return fail(field+".subjectRegExp", err)
			}
		}
		ci, err := verify.NewShortCertificateIdentity(id.Issuer, "", id.Subject, id.SubjectRegExp)
		if err != nil {
			return fail(field, err)
		}
		c.identities = append(c.identities, ci)
	}
	if len(v.Keyless) > 0 {
		if v.TrustedRoot == "" {
			return fail("trustedRoot", errors.New("empty; keyless identities are checked against a Sigstore trusted_root.json"))
		}
		path := resolvePath(dir, v.TrustedRoot)
		tr, err := root.NewTrustedRootFromPath(path)
		if err != nil {
			return fail("trustedRoot", fmt.Errorf("%s: %v", path, err))
		}
		kv, err := verify.NewVerifier(tr, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
		if err != nil {
			return fail("trustedRoot", fmt.Errorf("%s: %v", path, err))
		}
		c.keyless = kv
	}
	return c, nil
}

// resolvePath is p, relative to dir unless absolute.
func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// rank orders the reasons a layer fails by how close it came: the most
// telling one is reported when every layer fails.
var rank = map[error]int{ErrDigestMismatch: 1, ErrBadSignature: 2, ErrIdentityMismatch: 3}

// check accepts when one of layers passes c.
func (c *checker) check(ref name.Digest, layers []sigLayer) error {
	var best error
	bestRank := 0
	for _, l := range layers {
		reason, err := c.checkLayer(ref, l)
		if err == nil {
			return nil
		}
		if rank[reason] > bestRank {
			best, bestRank = err, rank[reason]
		}
	}
	return fmt.Errorf("%s: none of %d signatures passes: %w", c.origin, len(layers), best)
}

// checkLayer checks one signature; on failure it returns the reason (one
// of the sentinel errors) and the error to report.
func (c *checker) checkLayer(ref name.Digest, l sigLayer) (reason, err error) {
	bad := func(reason error, format string, args ...any) (error, error) {
		return reason, fmt.Errorf("%w: layer %s: %s", reason, l.digest, fmt.Sprintf(format, args...))
	}
	if l.err != nil {
		return bad(ErrBadSignature, "%v", l.err)
	}
	var p payload.Cosign
	if err := p.UnmarshalJSON(l.payload); err != nil {
		return bad(ErrBadSignature, "payload: %v", err)
	}
	if got := p.Image.DigestStr(); got != ref.DigestStr() {
		return bad(ErrDigestMismatch, "the payload is for %s", got)
	}
	var names []string
	for _, k := range c.keys {
		if l.verifyKey(k.verifier) == nil {
			return nil, nil
		}
		names = append(names, k.name)
	}
	if len(c.identities) > 0 {
		if l.annotations[AnnotationCertificate] == "" {
			if len(names) > 0 {
				return bad(ErrBadSignature, "verifies against none of the keys %s, and carries no certificate", strings.Join(names, ", "))
			}
			return bad(ErrBadSignature, "carries no certificate for a keyless verification")
		}
		return c.checkKeyless(l)
	}
	return bad(ErrBadSignature, "verifies against none of the keys %s", strings.Join(names, ", "))
}
