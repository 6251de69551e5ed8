// Package pluginsign signs plugin artifacts and verifies their signatures
// in the formats cosign reads and writes, so that a policy team signs with
// `wasmlet plugin sign` or `cosign sign` and a node (or `cosign verify`)
// checks either.
//
// Keys are cosign's files: the private key is PEM
// `ENCRYPTED SIGSTORE PRIVATE KEY` (older files say `ENCRYPTED COSIGN
// PRIVATE KEY`), a PKCS #8 ECDSA key encrypted by go-securesystemslib's
// `encrypted` package (scrypt key derivation, NaCl secretbox) under a
// password; the public key is a PEM `PUBLIC KEY` (PKIX).
//
// A signature is cosign's "simple signing" scheme with the `.sig` tag: for
// the artifact REPO@sha256:HEX, the payload
//
//	{"critical":{"identity":{"docker-reference":"REPO"},
//	  "image":{"docker-manifest-digest":"sha256:HEX"},
//	  "type":"cosign container image signature"},"optional":null}
//
// is signed with ECDSA over its SHA-256, and stored as one layer
// (media type application/vnd.dev.cosign.simplesigning.v1+json, the payload
// as its content, the base64 ASN.1 signature in the layer annotation
// dev.cosignproject.cosign/signature) of an OCI image tagged
// sha256-HEX.sig in the same repository. Signing again appends a layer;
// existing signatures are kept.
//
// A keyless signature carries, in annotations of the same layer, the
// signer's Fulcio certificate (dev.sigstore.cosign/certificate), its chain
// (dev.sigstore.cosign/chain) and Rekor's signed entry timestamp with the
// log entry (dev.sigstore.cosign/bundle). It is verified with sigstore-go
// against a Sigstore trusted_root.json read offline: the certificate chains
// to one of its Fulcio CAs at the log's integrated time, the entry's SET is
// signed by one of its Rekor keys and names the same signature and
// certificate, and the certificate's issuer and subject match one of the
// identities asked for.
//
// The node's own policy (NodePolicy, a PluginVerificationPolicy file) is
// checked besides each plugin's manifest: a plugin from a registry must
// pass both.
package pluginsign
