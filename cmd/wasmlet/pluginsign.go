package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
)

// pluginSign is `wasmlet plugin sign`.
func pluginSign(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	reg := registryFlags(fs)
	key := fs.String("key", "", "the cosign private key (cosign.key)")
	pwFile := fs.String("password-file", "", "a file whose first line is the key's password (default $COSIGN_PASSWORD)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitError
	}
	if len(pos) != 1 || *key == "" {
		fmt.Fprintln(stderr, "usage: wasmlet plugin sign --key cosign.key [--password-file FILE] [--registry-config FILE] [--registry-ca FILE] REF")
		return exitError
	}
	pw := []byte(os.Getenv("COSIGN_PASSWORD"))
	if *pwFile != "" {
		b, err := os.ReadFile(*pwFile)
		if err != nil {
			fmt.Fprintf(stderr, "wasmlet plugin sign: password file: %v\n", err)
			return exitError
		}
		pw, _, _ = bytes.Cut(b, []byte("\n"))
		pw = bytes.TrimSuffix(pw, []byte("\r"))
	}
	d, err := plugin.Sign(context.Background(), plugin.SignConfig{Ref: pos[0], KeyFile: *key, Password: pw, Registry: *reg})
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet plugin sign: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "signed %s\n", d)
	return 0
}

// pluginVerify is `wasmlet plugin verify`.
func pluginVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	reg := registryFlags(fs)
	key := fs.String("key", "", "a cosign public key (cosign.pub)")
	subject := fs.String("certificate-identity", "", "keyless: the signer's identity (e-mail or URI) in the Fulcio certificate")
	subjectRE := fs.String("certificate-identity-regexp", "", "keyless: a regular expression the signer's identity matches")
	issuer := fs.String("certificate-oidc-issuer", "", "keyless: the OIDC issuer in the Fulcio certificate")
	trustedRoot := fs.String("trusted-root", "", "keyless: a Sigstore trusted_root.json (Fulcio CAs, Rekor keys)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitError
	}
	usage := "usage: wasmlet plugin verify [--key cosign.pub] [--certificate-identity ID|--certificate-identity-regexp RE --certificate-oidc-issuer URL --trusted-root FILE] [--registry-config FILE] [--registry-ca FILE] REF"
	keyless := *subject != "" || *subjectRE != "" || *issuer != "" || *trustedRoot != ""
	if len(pos) != 1 || (*key == "" && !keyless) {
		fmt.Fprintln(stderr, usage)
		return exitError
	}
	v := abi.Verification{TrustedRoot: *trustedRoot}
	if *key != "" {
		v.Keys = []string{*key}
	}
	if keyless {
		v.Keyless = []abi.KeylessIdentity{{Issuer: *issuer, Subject: *subject, SubjectRegExp: *subjectRE}}
	}
	d, err := plugin.Verify(context.Background(), plugin.VerifyConfig{Ref: pos[0], Verification: v, Registry: *reg})
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet plugin verify: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "verified %s\n", d)
	return 0
}
