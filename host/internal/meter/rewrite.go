package meter

import (
	"errors"
	"fmt"
	"strings"
)

// Section ids of the WebAssembly binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

// sectionOrder is the order sections must appear in.
var sectionOrder = []byte{secType, secImport, secFunction, secTable, secMemory, secGlobal, secExport, secStart, secElement, secDataCount, secCode, secData}

// Rewrite returns wasm with probes (see the package comment), or an error
// naming what it could not instrument: a module that is not WebAssembly 1.0
// or 2.0 binary as wazero's default features know it, or that already
// imports ImportModule. The caller then falls back to wazero's
// WithCloseOnContextDone.
func Rewrite(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, errors.New("not a WebAssembly 1.0 binary")
	}
	secs := map[byte][]byte{}
	var customs [][]byte // kept custom sections, whole (id, size, content)
	r := &reader{b: wasm, pos: 8}
	for r.pos < len(r.b) {
		start := r.pos
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("section at %d: %w", start, r.err)
		}
		switch {
		case id == secCustom:
			name := (&reader{b: body}).name()
			if name == "name" || strings.HasPrefix(name, ".debug") {
				continue // function indices and code offsets change; drop them
			}
			customs = append(customs, r.b[start:r.pos])
		case id > secDataCount:
			return nil, fmt.Errorf("unsupported section id %d", id)
		default:
			if _, dup := secs[id]; dup {
				return nil, fmt.Errorf("duplicate section id %d", id)
			}
			secs[id] = body
		}
	}

	var m meterer
	var err error
	if secs[secType], err = m.addVoidType(secs[secType]); err != nil {
		return nil, fmt.Errorf("type section: %w", err)
	}
	if err := m.readFuncTypes(secs[secFunction]); err != nil {
		return nil, fmt.Errorf("function section: %w", err)
	}
	if secs[secImport], m.funcImports, m.globalImports, err = addTickImport(secs[secImport], m.tickType); err != nil {
		return nil, fmt.Errorf("import section: %w", err)
	}
	if secs[secGlobal], m.fuel, err = m.addFuelGlobal(secs[secGlobal]); err != nil {
		return nil, fmt.Errorf("global section: %w", err)
	}
	if b, ok := secs[secExport]; ok {
		if secs[secExport], err = m.shiftExports(b); err != nil {
			return nil, fmt.Errorf("export section: %w", err)
		}
	}
	if b, ok := secs[secStart]; ok {
		sr := &reader{b: b}
		idx := sr.u32()
		if sr.err != nil {
			return nil, fmt.Errorf("start section: %w", sr.err)
		}
		secs[secStart] = appendU32(nil, m.shift(idx))
	}
	if b, ok := secs[secElement]; ok {
		if secs[secElement], err = m.shiftElements(b); err != nil {
			return nil, fmt.Errorf("element section: %w", err)
		}
	}
	if b, ok := secs[secCode]; ok {
		if secs[secCode], err = m.rewriteCode(b); err != nil {
			return nil, fmt.Errorf("code section: %w", err)
		}
	}

	out := append([]byte(nil), wasm[:8]...)
	for _, id := range sectionOrder {
		b, ok := secs[id]
		if !ok {
			continue
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(b)))
		out = append(out, b...)
	}
	for _, c := range customs {
		out = append(out, c...)
	}
	return out, nil
}

// meterer holds what the rewrite of one module needs.
type meterer struct {
	tickType      uint32
	funcImports   uint32 // function imports before ours: our tick's index
	globalImports uint32
	fuel          uint32   // the fuel global's index
	typeParams    []uint32 // parameter count by type index
	funcParams    []uint32 // parameter count by defined function
}

// shift maps an original function index to its index after the new import.
func (m *meterer) shift(idx uint32) uint32 {
	if idx >= m.funcImports {
		return idx + 1
	}
	return idx
}

// makeProbe builds the probe of a function whose scratch i32 local is tmp:
// the decremented fuel stays in tmp rather than being loaded again.
func (m *meterer) makeProbe(tmp uint32) []byte {
	p := []byte{0x23}
	p = appendU32(p, m.fuel)
	p = append(p, 0x41, 0x01, 0x6b, 0x22) // i32.const 1; i32.sub; local.tee
	p = appendU32(p, tmp)
	p = append(p, 0x24) // global.set
	p = appendU32(p, m.fuel)
	p = append(p, 0x20) // local.get
	p = appendU32(p, tmp)
	p = append(p, 0x45, 0x04, 0x40, 0x41) // i32.eqz; if (empty); i32.const
	p = appendS32(p, Interval)
	p = append(p, 0x24)
	p = appendU32(p, m.fuel)
	p = append(p, 0x10)
	p = appendU32(p, m.funcImports)
	return append(p, 0x0b) // end
}

// addVoidType finds or appends the type () -> () and records each type's
// parameter count.
func (m *meterer) addVoidType(sec []byte) ([]byte, error) {
	r := &reader{b: sec}
	n := uint32(0)
	if sec != nil {
		n = r.u32()
	}
	found := false
	for i := uint32(0); i < n; i++ {
		if r.byte() != 0x60 {
			return nil, fmt.Errorf("type %d: only function types are supported", i)
		}
		np := r.u32()
		r.bytes(int(np))
		nr := r.u32()
		r.bytes(int(nr))
		if r.err != nil {
			return nil, r.err
		}
		m.typeParams = append(m.typeParams, np)
		if np == 0 && nr == 0 && !found {
			m.tickType, found = i, true
		}
	}
	if found {
		return sec, nil
	}
	m.tickType = n
	m.typeParams = append(m.typeParams, 0)
	out := appendU32(nil, n+1)
	out = append(out, sec[lenPrefix(sec):]...)
	return append(out, 0x60, 0x00, 0x00), nil
}

// readFuncTypes records the type of each function the module defines.
func (m *meterer) readFuncTypes(sec []byte) error {
	if sec == nil {
		return nil
	}
	r := &reader{b: sec}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.u32()
		if int(t) >= len(m.typeParams) {
			return fmt.Errorf("function %d: type %d out of range", i, t)
		}
		m.funcParams = append(m.funcParams, m.typeParams[t])
	}
	return r.err
}

// lenPrefix is the length of the leading u32 count of a vector section.
func lenPrefix(sec []byte) int {
	if sec == nil {
		return 0
	}
	r := &reader{b: sec}
	r.u32()
	return r.pos
}

// addTickImport appends the tick import and counts function and global imports.
func addTickImport(sec []byte, typ uint32) ([]byte, uint32, uint32, error) {
	r := &reader{b: sec}
	n := uint32(0)
	if sec != nil {
		n = r.u32()
	}
	var funcs, globals uint32
	for i := uint32(0); i < n; i++ {
		mod := r.name()
		r.name()
		if mod == ImportModule {
			return nil, 0, 0, fmt.Errorf("module already imports %q", ImportModule)
		}
		switch kind := r.byte(); kind {
		case 0x00:
			r.u32()
			funcs++
		case 0x01:
			r.byte()
			r.limits()
		case 0x02:
			r.limits()
		case 0x03:
			r.byte()
			r.byte()
			globals++
		default:
			return nil, 0, 0, fmt.Errorf("import %d: unsupported kind %#x", i, kind)
		}
		if r.err != nil {
			return nil, 0, 0, r.err
		}
	}
	out := appendU32(nil, n+1)
	out = append(out, sec[lenPrefix(sec):]...)
	out = appendName(out, ImportModule)
	out = appendName(out, ImportFunc)
	out = append(out, 0x00)
	out = appendU32(out, typ)
	return out, funcs, globals, nil
}

// addFuelGlobal shifts ref.func in global initializers and appends the fuel
// global (mutable i32 = Interval).
func (m *meterer) addFuelGlobal(sec []byte) ([]byte, uint32, error) {
	r := &reader{b: sec}
	n := uint32(0)
	if sec != nil {
		n = r.u32()
	}
	out := appendU32(nil, n+1)
	for i := uint32(0); i < n; i++ {
		out = append(out, r.byte(), r.byte()) // valtype, mut
		var err error
		if out, err = m.constExpr(r, out); err != nil {
			return nil, 0, fmt.Errorf("global %d: %w", i, err)
		}
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	out = append(out, 0x7f, 0x01, 0x41)
	out = appendS32(out, Interval)
	out = append(out, 0x0b)
	return out, m.globalImports + n, nil
}

// constExpr copies a constant expression, shifting ref.func.
func (m *meterer) constExpr(r *reader, out []byte) ([]byte, error) {
	for r.err == nil {
		start := r.pos
		op := r.byte()
		switch op {
		case 0x0b:
			return append(out, op), nil
		case 0x41:
			r.s64()
		case 0x42:
			r.s64()
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23:
			r.u32()
		case 0xd0:
			r.byte()
		case 0xd2:
			idx := r.u32()
			out = append(out, 0xd2)
			out = appendU32(out, m.shift(idx))
			continue
		case 0xfd: // v128.const
			if r.u32() != 12 {
				return nil, errors.New("unsupported SIMD op in constant expression")
			}
			r.bytes(16)
		default:
			return nil, fmt.Errorf("unsupported opcode %#x in constant expression", op)
		}
		out = append(out, r.b[start:r.pos]...)
	}
	return nil, r.err
}

func (m *meterer) shiftExports(sec []byte) ([]byte, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		start := r.pos
		name := r.name()
		if name == ImportModule {
			return nil, fmt.Errorf("export %q is reserved", name)
		}
		kind := r.byte()
		out = append(out, r.b[start:r.pos]...)
		idx := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if kind == 0x00 {
			idx = m.shift(idx)
		}
		out = appendU32(out, idx)
	}
	return out, r.err
}

// shiftElements rewrites every function index in the element segments.
func (m *meterer) shiftElements(sec []byte) ([]byte, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := appendU32(nil, n)
	var err error
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		out = appendU32(out, flags)
		if flags > 7 {
			return nil, fmt.Errorf("segment %d: unknown flags %d", i, flags)
		}
		if flags&2 != 0 && flags&1 == 0 { // explicit table index
			out = appendU32(out, r.u32())
		}
		if flags&1 == 0 { // active: offset expression
			if out, err = m.constExpr(r, out); err != nil {
				return nil, fmt.Errorf("segment %d offset: %w", i, err)
			}
		}
		if flags&3 != 0 { // elemkind or reftype byte
			out = append(out, r.byte())
		}
		cnt := r.u32()
		out = appendU32(out, cnt)
		for j := uint32(0); j < cnt && r.err == nil; j++ {
			if flags&4 != 0 {
				if out, err = m.constExpr(r, out); err != nil {
					return nil, fmt.Errorf("segment %d item %d: %w", i, j, err)
				}
			} else {
				out = appendU32(out, m.shift(r.u32()))
			}
		}
	}
	return out, r.err
}

func (m *meterer) rewriteCode(sec []byte) ([]byte, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, r.err
		}
		if int(i) >= len(m.funcParams) {
			return nil, fmt.Errorf("function %d: no type", m.funcImports+i)
		}
		nb, err := m.rewriteBody(body, m.funcParams[i])
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", m.funcImports+i, err)
		}
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	return out, nil
}

// rewriteBody copies one function body, probing its entry and every loop
// header and shifting call and ref.func indices.
func (m *meterer) rewriteBody(body []byte, params uint32) ([]byte, error) {
	r := &reader{b: body}
	groups := r.u32()
	locals := uint64(params)
	for g := uint32(0); g < groups; g++ {
		locals += uint64(r.u32())
		r.byte()
	}
	if r.err != nil {
		return nil, r.err
	}
	if locals >= 50000 {
		return nil, fmt.Errorf("%d locals: no room for the meter's", locals)
	}
	// One more local group: the probe's scratch i32, after all the others.
	probe := m.makeProbe(uint32(locals))
	out := make([]byte, 0, len(body)+len(probe)*4+8)
	out = appendU32(out, groups+1)
	out = append(out, body[lenPrefix(body):r.pos]...)
	out = append(out, 0x01, 0x7f)
	if !loopFirst(body[r.pos:]) {
		out = append(out, probe...)
	}
	for r.pos < len(body) && r.err == nil {
		start := r.pos
		op := r.byte()
		switch {
		case op == 0x10 || op == 0xd2: // call, ref.func
			idx := r.u32()
			out = append(out, op)
			out = appendU32(out, m.shift(idx))
			continue
		case op == 0x03: // loop
			r.blockType()
			out = append(out, r.b[start:r.pos]...)
			out = append(out, probe...)
			continue
		case op == 0x02 || op == 0x04: // block, if
			r.blockType()
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
			op >= 0x45 && op <= 0xc4:
		case op == 0x0c || op == 0x0d, op >= 0x20 && op <= 0x26:
			r.u32()
		case op == 0x0e: // br_table
			cnt := r.u32()
			for j := uint32(0); j <= cnt && r.err == nil; j++ {
				r.u32()
			}
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			cnt := r.u32()
			r.bytes(int(cnt))
		case op >= 0x28 && op <= 0x3e:
			r.memarg()
		case op == 0x3f || op == 0x40:
			r.u32()
		case op == 0x41:
			r.s64()
		case op == 0x42:
			r.s64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xd0:
			r.byte()
		case op == 0xfc:
			if err := r.miscOp(); err != nil {
				return nil, err
			}
		case op == 0xfd:
			if err := r.simdOp(); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unsupported opcode %#x at %d", op, start)
		}
		out = append(out, r.b[start:r.pos]...)
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// loopFirst reports whether code reaches a loop header before any call,
// branch or return: straight-line local, global, constant and numeric
// instructions and block entries only. Then every entry runs the loop's
// probe and the function needs none of its own. Standard Go's wasm functions
// all start so (global.get; local.set; block; loop …), which halves the
// probes a Go guest runs.
func loopFirst(code []byte) bool {
	r := &reader{b: code}
	for r.err == nil && r.pos < len(code) {
		switch op := r.byte(); {
		case op == 0x03:
			return true
		case op == 0x01, op == 0x1a, op >= 0x45 && op <= 0xc4:
		case op == 0x02:
			r.blockType()
		case op >= 0x20 && op <= 0x24:
			r.u32()
		case op == 0x41, op == 0x42:
			r.s64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		default:
			return false
		}
	}
	return false
}

// reader decodes the binary format; the first error sticks.
type reader struct {
	b   []byte
	pos int
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.err = errTruncated
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || r.pos+n > len(r.b) {
		r.err = errTruncated
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > 0xffffffff {
				r.err = errors.New("u32 overflow")
			}
			return uint32(v)
		}
	}
	if r.err == nil {
		r.err = errors.New("u32 too long")
	}
	return 0
}

// s64 skips a signed LEB128 of up to 64 bits.
func (r *reader) s64() {
	for i := 0; i < 10; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	if r.err == nil {
		r.err = errors.New("sleb too long")
	}
}

func (r *reader) name() string {
	n := r.u32()
	return string(r.bytes(int(n)))
}

func (r *reader) limits() {
	flag := r.byte()
	r.u32()
	if flag&1 != 0 {
		r.u32()
	}
}

func (r *reader) blockType() {
	if r.pos < len(r.b) {
		switch r.b[r.pos] {
		case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			r.pos++
			return
		}
	}
	r.s64() // s33 type index
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory index
		r.u32()
	}
	r.u32()
}

// miscOp skips the immediates of a 0xFC-prefixed instruction.
func (r *reader) miscOp() error {
	switch sub := r.u32(); {
	case sub <= 7:
	case sub == 8, sub == 10, sub == 12, sub == 14:
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
		r.u32()
	default:
		return fmt.Errorf("unsupported opcode 0xfc %d", sub)
	}
	return nil
}

// simdOp skips the immediates of a 0xFD-prefixed instruction.
func (r *reader) simdOp() error {
	switch sub := r.u32(); {
	case sub <= 11, sub == 92, sub == 93:
		r.memarg()
	case sub == 12, sub == 13:
		r.bytes(16)
	case sub >= 21 && sub <= 34:
		r.byte()
	case sub >= 84 && sub <= 91:
		r.memarg()
		r.byte()
	case sub <= 0xff:
	default:
		return fmt.Errorf("unsupported opcode 0xfd %d", sub)
	}
	return nil
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
