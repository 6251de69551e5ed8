package sdk

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Policy is one named admission policy of a Bundle.
type Policy struct {
	// Name names the policy: a denial's message and an error start with
	// "<Name>: ", and while the policy runs Config looks a key up as
	// "<Name>.<key>" first. It must be non-empty, unique in its bundle and
	// hold no "." or whitespace.
	Name string
	// Admitter decides. It must not modify the request: the bundle's
	// policies share the one decoded request.
	Admitter Admitter
	// Reads is the policy's Reads option (sdk.Reads(parts)): the parts of a
	// pod and of an admission request it reads. The zero Option reads every
	// part, as Register without Reads does.
	Reads Option
}

// Bundle is an Admitter that runs several policies in one module, on one
// decoded request: a team's policies as one plugin instead of one plugin
// each, so an admission decodes the pod once and runs one Go runtime's code
// instead of several (see RATIONALE.md, "Several policies in one module").
//
// The policies run in the order given. The first denial is the bundle's
// verdict, its Reason kept and its Message prefixed "<policy>: "; a policy's
// error (or panic) is the bundle's error, prefixed likewise, and the
// policies after it do not run. The pod is allowed when every policy allows
// it.
//
// Config per policy: while a policy runs, Config(key) answers the
// manifest's "<policy>.<key>" when it is set and the plain "<key>" (a
// default for the whole bundle) otherwise, so a policy written for a
// plugin of its own reads its own keys unchanged in a bundle:
//
//	config:
//	  exemptNamespaces: kube-system           # every policy of the bundle
//	  image-allowlist.allowed: registry.k8s.io
//	  require-limits.exemptNamespaces: default  # require-limits only
//
// AdmitRequest.Node and AdmitRequest.PodsOnNode answer a policy only when
// its own Reads names them, as they do for a plugin of its own; the bundle
// reads the union of its policies' parts (Reads).
//
// A policy whose Admitter is a ConfigChecker has its config checked when the
// bundle is loaded (CheckConfig), with its own keys likewise; the bundle
// refuses the config with the first policy's error, prefixed "<policy>: ".
//
// A bundle's policies run one at a time: natively, concurrent calls of
// Admit wait for each other.
type Bundle struct {
	policies []bundled
	reads    Option
}

// bundled is a policy of a Bundle with what Config and the request's
// accessors need while it runs.
type bundled struct {
	Policy
	scope policyScope
}

// policyScope is what the SDK knows of the bundle policy now running.
type policyScope struct {
	name   string
	unread Parts // the parts the policy does not read
}

// running is the bundle policy now running, nil outside a bundle's Admit;
// mu lets one bundle run at a time.
var running struct {
	mu    sync.Mutex
	scope atomic.Pointer[policyScope]
}

// NewBundle makes a Bundle of policies, run in the given order. It panics
// when there are none, or when a policy has no Admitter, an Admitter that
// is a Bundle, a name that is empty, repeated or holds "." or whitespace:
// like Register, it is called from init and a mistake is the plugin's own.
func NewBundle(policies ...Policy) *Bundle {
	if len(policies) == 0 {
		panic("sdk.NewBundle: no policies")
	}
	b := &Bundle{reads: Option{reads: true}}
	seen := map[string]bool{}
	for _, p := range policies {
		switch {
		case p.Name == "" || strings.ContainsAny(p.Name, ". \t\r\n"):
			panic(fmt.Sprintf("sdk.NewBundle: policy name %q: want a non-empty name without \".\" or whitespace", p.Name))
		case seen[p.Name]:
			panic(fmt.Sprintf("sdk.NewBundle: policy %q given twice", p.Name))
		case p.Admitter == nil:
			panic(fmt.Sprintf("sdk.NewBundle: policy %q has no Admitter", p.Name))
		}
		if _, ok := p.Admitter.(*Bundle); ok {
			panic(fmt.Sprintf("sdk.NewBundle: policy %q is a bundle: list its policies instead", p.Name))
		}
		seen[p.Name] = true
		unread := Parts(0)
		switch {
		case !p.Reads.reads:
			b.reads = Option{} // a policy reading every part makes the bundle read every part
		case b.reads.reads:
			b.reads.parts |= p.Reads.parts
		}
		if p.Reads.reads {
			unread = AllParts &^ p.Reads.parts
		}
		b.policies = append(b.policies, bundled{Policy: p, scope: policyScope{name: p.Name, unread: unread}})
	}
	return b
}

// RegisterPolicies registers a Bundle of policies as the plugin, reading
// the union of their parts: NewBundle and Register in one. Call it from
// init, instead of Register.
func RegisterPolicies(policies ...Policy) {
	b := NewBundle(policies...)
	Register(b, b.Reads())
}

// Reads is the Register option that reads the union of the bundle's
// policies' parts: every part when one of them reads every part.
func (b *Bundle) Reads() Option { return b.reads }

// Admit runs the policies in order on req: the first denial or error,
// naming its policy, or Allow.
func (b *Bundle) Admit(req AdmitRequest) (Verdict, error) {
	running.mu.Lock()
	defer running.mu.Unlock()
	for i := range b.policies {
		p := &b.policies[i]
		v, err := p.admit(req)
		if err != nil {
			return Verdict{}, fmt.Errorf("%s: %w", p.Name, err)
		}
		if !v.Allowed {
			if v.Message == "" {
				v.Message = p.Name
			} else {
				v.Message = p.Name + ": " + v.Message
			}
			return v, nil
		}
	}
	return Allow(), nil
}

// CheckConfig runs, in order, the config check of every policy whose
// Admitter is a ConfigChecker, each with its own config keys (Config as
// while it admits): the first error, prefixed "<policy>: ", or nil.
func (b *Bundle) CheckConfig() error {
	running.mu.Lock()
	defer running.mu.Unlock()
	for i := range b.policies {
		p := &b.policies[i]
		c, ok := p.Admitter.(ConfigChecker)
		if !ok {
			continue
		}
		if err := p.check(c); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return nil
}

// check runs one policy's config check with its scope set; a panic is its
// error.
func (p *bundled) check(c ConfigChecker) (err error) {
	running.scope.Store(&p.scope)
	defer func() {
		running.scope.Store(nil)
		if r := recover(); r != nil {
			err = fmt.Errorf("config check panicked: %v", r)
		}
	}()
	return c.CheckConfig()
}

// admit runs one policy with its scope set; a panic is its error.
func (p *bundled) admit(req AdmitRequest) (v Verdict, err error) {
	running.scope.Store(&p.scope)
	defer func() {
		running.scope.Store(nil)
		if r := recover(); r != nil {
			v, err = Verdict{}, fmt.Errorf("panicked: %v", r)
		}
	}()
	return p.Admitter.Admit(req)
}

// PolicyName is the name of the Bundle policy now running, "" outside a
// bundle. A helper that caches what it made of a config value keys the
// cache by it too: the same key may hold another value for another policy.
func PolicyName() string {
	if s := running.scope.Load(); s != nil {
		return s.name
	}
	return ""
}

// notSent says why part of an admission request was not sent to the code
// now running, "" when it was: the registered plugin's Reads, and within a
// bundle the running policy's Reads too.
func notSent(part Parts) string {
	if registered.unread&part != 0 {
		return "the plugin registered with sdk.Reads without sdk."
	}
	if s := running.scope.Load(); s != nil && s.unread&part != 0 {
		return "the policy " + s.name + " of the bundle has Reads without sdk."
	}
	return ""
}
