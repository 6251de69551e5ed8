package pluginfetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/wasmlet/wasmlet/abi"
)

// Verifier decides whether an artifact may be loaded: it checks the
// signatures of the artifact at ref against what the reference manifest's
// verification asks (nil: nothing) and the node's own policy. Key and root
// files of v are relative to manifestDir, the reference manifest's
// directory. A nil error accepts the artifact; an error says why not.
type Verifier interface {
	Verify(ctx context.Context, ref name.Digest, v *abi.Verification, manifestDir string) error
}

// ErrVerifierMissing: the reference manifest asks for signatures and the
// node has no verifier that checks them.
var ErrVerifierMissing = errors.New("signatures are required but this node has no signature verifier")

// NoPolicy is the Verifier of a node without a verification policy: it
// accepts an artifact when nothing is required of it and refuses one whose
// reference manifest asks for signatures, as it cannot check them — never
// fails open.
type NoPolicy struct{}

// Verify implements Verifier.
func (NoPolicy) Verify(_ context.Context, ref name.Digest, v *abi.Verification, _ string) error {
	if v.Required() {
		return fmt.Errorf("%s: %w", ref, ErrVerifierMissing)
	}
	return nil
}

// requirement identifies what an artifact was verified against: the
// verification as written, the content of the files it names and of the
// node's policy file, so that a cached artifact is verified again when a
// key or the policy is replaced. It is a hex sha256.
func requirement(v *abi.Verification, manifestDir, policyFile string) string {
	h := sha256.New()
	b, _ := json.Marshal(v)
	h.Write(b)
	var files []string
	if policyFile != "" {
		files = append(files, policyFile)
	}
	if v != nil {
		files = append(files, v.Keys...)
		if v.TrustedRoot != "" {
			files = append(files, v.TrustedRoot)
		}
	}
	for _, f := range files {
		if strings.Contains(f, "-----BEGIN") {
			continue // inline PEM: already in b
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(manifestDir, f)
		}
		c, err := os.ReadFile(f)
		if err != nil {
			c = []byte("unreadable: " + err.Error())
		}
		fmt.Fprintf(h, "\x00%s\x00%d\x00", f, len(c))
		h.Write(c)
	}
	return hex.EncodeToString(h.Sum(nil))
}
