package sdk

import (
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// decoder is a reflection-free JSON reader. Each message type has a decode
// function that walks its object with field/elem and assigns the fields it
// knows, skipping everything else after validating it. Semantics follow
// encoding/json with Kubernetes' case-sensitive field matching
// (sigs.k8s.io/json): null leaves scalars alone and sets pointers, maps and
// slices to nil, duplicate keys merge like encoding/json, invalid UTF-8 in a
// string becomes U+FFFD, and any syntax or type error fails the whole decode.
//
// Strings are not copied: a string without escapes points into buf, which the
// decoder owns and nobody may modify afterwards (callers copy untrusted
// buffers first; the wasm export glue hands over a buffer allocated per call).
type decoder struct {
	buf []byte
	pos int
	err error
	key []byte // the current object member's name, valid until the next field call

	parts Parts // the optional parts of a pod to decode; the others are skipped

	// Arenas: values that would each be a small allocation are carved out
	// of a few shared blocks instead. Allocation is among the dearest
	// things a Go wasm guest does. A finished slice is capped (s[a:b:b]) so
	// appending to it never writes into a neighbour.
	strs   []string
	strps  []string
	bools  []bool
	ints   []int64
	int32s []int32

	// The arenas of pod types, which gendecode finds by element type (see
	// pod_decode.go). A block tag makes the arena's type's arrays go
	// through decodeArray, which starts a fresh block of that many
	// elements when the arena runs out; the others hold pointers' targets.
	containers  []Container     `block:"4"`
	envs        []EnvVar        `block:"16"`
	ports       []ContainerPort `block:"8"`
	mounts      []VolumeMount   `block:"16"`
	volumes     []Volume        `block:"8"`
	secctxs     []SecurityContext
	podSecs     []PodSecurityContext
	caps        []Capabilities
	seccomps    []SeccompProfile
	hostPaths   []HostPathVolumeSource
	ownerRefs   []OwnerReference `block:"4"`
	tolerations []Toleration     `block:"8"`
}

// slab is a pod decoder with the first block of each of its arenas: one
// allocation per request instead of one per arena and per small value.
// Measured in the wasm guest, an allocation costs ~1 µs whatever its size
// up to a few KB, and a 4 KB pod needed ~25 of them.
type slab struct {
	d           decoder
	strs        [64]string
	strps       [8]string
	bools       [16]bool
	ints        [8]int64
	int32s      [4]int32
	containers  [4]Container
	envs        [16]EnvVar
	ports       [8]ContainerPort
	mounts      [16]VolumeMount
	volumes     [8]Volume
	secctxs     [4]SecurityContext
	podSecs     [1]PodSecurityContext
	caps        [4]Capabilities
	seccomps    [4]SeccompProfile
	hostPaths   [4]HostPathVolumeSource
	ownerRefs   [2]OwnerReference
	tolerations [8]Toleration
}

// newDecoder returns a decoder of buf whose arenas start in one slab. A
// finished value may point into the slab: it lives as long as any of them.
func newDecoder(buf []byte) *decoder {
	s := new(slab)
	d := &s.d
	d.buf = buf
	d.parts = AllParts
	d.strs, d.strps, d.bools, d.ints, d.int32s = s.strs[:0], s.strps[:0], s.bools[:0], s.ints[:0], s.int32s[:0]
	d.containers, d.envs, d.ports, d.mounts, d.volumes = s.containers[:0], s.envs[:0], s.ports[:0], s.mounts[:0], s.volumes[:0]
	d.secctxs, d.podSecs, d.caps, d.seccomps = s.secctxs[:0], s.podSecs[:0], s.caps[:0], s.seccomps[:0]
	d.hostPaths, d.ownerRefs, d.tolerations = s.hostPaths[:0], s.ownerRefs[:0], s.tolerations[:0]
	return d
}

// aliasStr turns decoder-owned bytes into a string without copying.
func aliasStr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// DecodeError is a malformed or mistyped JSON message.
type DecodeError struct {
	// Offset is the byte offset in the input where decoding stopped.
	Offset int
	// Msg says what was wrong.
	Msg string
}

// Error implements error.
func (e *DecodeError) Error() string {
	return "json: offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// maxDepth bounds nesting, like encoding/json.
const maxDepth = 10000

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.pos, Msg: msg}
	}
	d.pos = len(d.buf) // stop every loop
}

// ws skips whitespace and returns the next byte, or 0 at the end.
func (d *decoder) ws() byte {
	for d.pos < len(d.buf) {
		switch c := d.buf[d.pos]; c {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return c
		}
	}
	return 0
}

// end checks that only whitespace follows the top-level value.
func (d *decoder) end() error {
	if d.err == nil && d.ws() != 0 {
		d.fail("invalid character after top-level value")
	}
	return d.err
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool {
	if d.pos < len(d.buf) && d.buf[d.pos] == '"' {
		return false // the common case, without a call
	}
	if d.ws() != 'n' {
		return false
	}
	d.literal("null")
	return true
}

func (d *decoder) literal(lit string) {
	if len(d.buf)-d.pos < len(lit) || string(d.buf[d.pos:d.pos+len(lit)]) != lit {
		d.fail("invalid literal")
		return
	}
	d.pos += len(lit)
}

// field advances to the next member of an object; n counts the members read
// and must start at 0, which makes field consume the opening brace. It
// returns false at the end of the object, on null and on error. The member's
// name is in d.key and its value is next.
func (d *decoder) field(n *int) bool {
	// Fast path for compact JSON (what the host sends): `{"` or `,"`, a
	// plain ASCII key, `":`. Everything else takes the general path.
	buf, i := d.buf, d.pos
	if d.err == nil && i+1 < len(buf) && buf[i+1] == '"' && (buf[i] == ',' && *n > 0 || buf[i] == '{' && *n == 0) {
		start := i + 2
		j := plainWords(buf, start)
		if j+8 > len(buf) {
			j = scanPlain(buf, j) // the last bytes of the message
		}
		if j+1 < len(buf) && buf[j] == '"' && buf[j+1] == ':' {
			d.key = buf[start:j]
			d.pos = j + 2
			*n++
			return true
		}
	}
	if d.err == nil && i < len(buf) && buf[i] == '}' && *n > 0 {
		d.pos = i + 1 // the end of a non-empty object, without next's call
		return false
	}
	var isNull bool
	if !d.next(n, '{', &isNull) {
		return false
	}
	if d.ws() != '"' {
		d.fail("expected string for object key")
		return false
	}
	d.key = d.strAt(d.pos + 1)
	if d.pos < len(d.buf) && d.buf[d.pos] == ':' {
		d.pos++
		return true
	}
	if d.ws() != ':' {
		d.fail("expected ':' after object key")
		return false
	}
	d.pos++
	return d.err == nil
}

// elem advances to the next element of an array; n counts the elements read
// and must start at 0. It returns false at the end, on null and on error.
// *isNull reports a null array (only meaningful when n is still 0).
func (d *decoder) elem(n *int, isNull *bool) bool {
	// Fast path for compact JSON: `[` or `,` then a value, or the `]`.
	buf, i := d.buf, d.pos
	if d.err == nil && i+1 < len(buf) {
		switch c, next := buf[i], buf[i+1]; {
		case *n == 0 && c == '[' && next != ']' && next > ' ', *n > 0 && c == ',' && next > ' ':
			d.pos = i + 1
			*n++
			return true
		case *n > 0 && c == ']':
			d.pos = i + 1
			return false
		}
	}
	return d.next(n, '[', isNull)
}

// next steps into the next member or element of the container that opens
// with open ('{' or '['): the opener when *n is 0, a comma after that. It
// returns false at the closer, on null (setting *isNull) and on error.
func (d *decoder) next(n *int, open byte, isNull *bool) bool {
	if d.err != nil {
		return false
	}
	c := d.ws()
	closer := open + 2 // '}' and ']' follow their openers by 2
	switch {
	case *n == 0 && c == open:
		d.pos++
		if d.ws() == closer {
			d.pos++
			return false
		}
	case *n == 0 && c == 'n':
		d.literal("null")
		*isNull = true
		return false
	case *n == 0:
		if open == '{' {
			d.fail("expected object")
		} else {
			d.fail("expected array")
		}
		return false
	case c == ',':
		d.pos++
	case c == closer:
		d.pos++
		return false
	default:
		if open == '{' {
			d.fail("expected ',' or '}' in object")
		} else {
			d.fail("expected ',' or ']' in array")
		}
		return false
	}
	*n++
	return true
}

// strBytes reads a string token. The result aliases buf when the string has
// no escapes and is valid UTF-8; otherwise it is a fresh unescaped copy.
func (d *decoder) strBytes() []byte {
	if d.ws() != '"' {
		d.fail("expected string")
		return nil
	}
	return d.strAt(d.pos + 1)
}

// strAt reads the rest of a string whose opening quote is at start-1.
func (d *decoder) strAt(start int) []byte {
	buf := d.buf
	i := start
	for {
		i = scanPlain(buf, i)
		if i >= len(buf) {
			d.pos = i
			d.fail("unterminated string")
			return nil
		}
		c := buf[i]
		if c == '"' {
			d.pos = i + 1
			return buf[start:i]
		}
		if c < utf8.RuneSelf {
			return d.strSlow(start, i) // an escape or a control character
		}
		r, size := utf8.DecodeRune(buf[i:])
		if r == utf8.RuneError && size == 1 {
			return d.strSlow(start, i)
		}
		i += size
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// scanPlain returns the index of the first byte at or after i that is a
// quote, a backslash, a control character or not ASCII, or len(buf). It
// tests eight bytes per step: in wasm a byte loop costs several times what
// it does natively, and most of a message is string content.
func scanPlain(buf []byte, i int) int {
	for ; i+8 <= len(buf); i += 8 {
		w := *(*uint64)(unsafe.Pointer(&buf[i]))
		q := w ^ ('"' * ones)
		b := w ^ ('\\' * ones)
		if ((q-ones)&^q|(b-ones)&^b|(w-0x20*ones)|w)&highs != 0 {
			break
		}
	}
	for ; i < len(buf); i++ {
		if c := buf[i]; c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// plainWords is scanPlain's word loop alone, small enough to be inlined (a
// call costs a Go wasm guest more than a few word operations, and key and
// value scans are most of what a decode does): it returns the index of the
// first byte at or after i that ends a plain run, or an index within 8
// bytes of the end where the caller finishes with scanPlain.
func plainWords(buf []byte, i int) int {
	for i+8 <= len(buf) {
		if m := specials(*(*uint64)(unsafe.Pointer(&buf[i]))); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// specials has the high bit set in the bytes of w that are a quote, a
// backslash, a control character or not ASCII, and possibly in bytes after
// the first such byte (borrows): the lowest set bit is exact (little endian).
func specials(w uint64) uint64 {
	q := w ^ ('"' * ones)
	b := w ^ ('\\' * ones)
	return ((q-ones)&^q | (b-ones)&^b | (w - 0x20*ones) | w) & highs
}

// strSlow finishes a string that needs unescaping or UTF-8 repair, from i on.
func (d *decoder) strSlow(start, i int) []byte {
	buf := d.buf
	out := make([]byte, i-start, i-start+16)
	copy(out, buf[start:i])
	for i < len(buf) {
		c := buf[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return out
		case c < 0x20:
			d.pos = i
			d.fail("invalid control character in string")
			return nil
		case c == '\\':
			if i+1 >= len(buf) {
				d.pos = i
				d.fail("unterminated string escape")
				return nil
			}
			i++
			switch buf[i] {
			case '"', '\\', '/':
				out = append(out, buf[i])
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(buf[i+1:])
				if r < 0 {
					d.pos = i
					d.fail("invalid \\u escape in string")
					return nil
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+2 < len(buf) && buf[i+1] == '\\' && buf[i+2] == 'u' {
						r2 = hex4(buf[i+3:])
					}
					if dec := utf16.DecodeRune(r, r2); r2 >= 0 && dec != unicode.ReplacementChar {
						r = dec
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				d.pos = i
				d.fail("invalid escape in string")
				return nil
			}
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, unicode.ReplacementChar)
			} else {
				out = append(out, buf[i:i+size]...)
			}
			i += size
		}
	}
	d.pos = len(buf)
	d.fail("unterminated string")
	return nil
}

// hex4 parses four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// str reads a string value without copying it (see decoder).
func (d *decoder) str() string { return aliasStr(d.strBytes()) }

// setStr assigns a string value; null leaves *p unchanged.
func (d *decoder) setStr(p *string) {
	// Fast path: a plain ASCII string right here.
	buf, i := d.buf, d.pos
	if i < len(buf) && buf[i] == '"' {
		j := plainWords(buf, i+1)
		if j+8 > len(buf) {
			j = scanPlain(buf, j) // the last bytes of the message
		}
		if j < len(buf) && buf[j] == '"' {
			*p = aliasStr(buf[i+1 : j])
			d.pos = j + 1
			return
		}
	}
	switch d.ws() {
	case '"':
		if b := d.strAt(d.pos + 1); len(b) > 0 {
			*p = unsafe.String(&b[0], len(b))
		} else if d.err == nil {
			*p = ""
		}
	case 'n':
		d.literal("null")
	default:
		d.fail("cannot decode " + d.kindAt() + " into a string")
	}
}

// setBool assigns a boolean; null leaves *p unchanged.
func (d *decoder) setBool(p *bool) {
	switch d.ws() {
	case 't':
		d.literal("true")
		*p = true
	case 'f':
		d.literal("false")
		*p = false
	case 'n':
		d.literal("null")
	default:
		d.fail("cannot decode " + d.kindAt() + " into a bool")
	}
}

// setPtr assigns a pointer field with set; null sets it to nil. A new
// target comes from arena.
func setPtr[T any](d *decoder, p **T, arena *[]T, set func(*decoder, *T)) {
	if d.null() {
		*p = nil
		return
	}
	if *p == nil {
		*p = arenaNew(arena)
	}
	set(d, *p)
}

// arenaNew returns a pointer to a fresh zero element of *a, growing it by
// blocks. Earlier pointers stay valid: a full block is left to them.
func arenaNew[T any](a *[]T) *T {
	if len(*a) == cap(*a) {
		*a = make([]T, 0, 16)
	}
	var zero T
	*a = append(*a, zero)
	return &(*a)[len(*a)-1]
}

// number reads a number token, checking JSON's grammar, and returns it.
func (d *decoder) number() []byte {
	buf := d.buf
	start := d.pos
	i := start
	if i < len(buf) && buf[i] == '-' {
		i++
	}
	switch {
	case i < len(buf) && buf[i] == '0':
		i++
	case i < len(buf) && '1' <= buf[i] && buf[i] <= '9':
		for i < len(buf) && '0' <= buf[i] && buf[i] <= '9' {
			i++
		}
	default:
		d.pos = i
		d.fail("invalid number")
		return nil
	}
	if i < len(buf) && buf[i] == '.' {
		i++
		j := i
		for i < len(buf) && '0' <= buf[i] && buf[i] <= '9' {
			i++
		}
		if i == j {
			d.pos = i
			d.fail("invalid number: digit expected after '.'")
			return nil
		}
	}
	if i < len(buf) && (buf[i] == 'e' || buf[i] == 'E') {
		i++
		if i < len(buf) && (buf[i] == '+' || buf[i] == '-') {
			i++
		}
		j := i
		for i < len(buf) && '0' <= buf[i] && buf[i] <= '9' {
			i++
		}
		if i == j {
			d.pos = i
			d.fail("invalid number: digit expected in exponent")
			return nil
		}
	}
	d.pos = i
	return buf[start:i]
}

// integer reads an integer that fits in bits bits; null reports ok=false.
func (d *decoder) integer(bits int) (v int64, ok bool) {
	// Fast path: up to 9 digits, which fit any size asked for, followed by
	// something that cannot continue a number.
	buf, i := d.buf, d.pos
	neg := i < len(buf) && buf[i] == '-'
	if neg {
		i++
	}
	if i < len(buf) && '1' <= buf[i] && buf[i] <= '9' || i+1 < len(buf) && buf[i] == '0' && (buf[i+1] < '0' || buf[i+1] > '9') {
		j := i
		for j < len(buf) && j-i < 10 && '0' <= buf[j] && buf[j] <= '9' {
			v = v*10 + int64(buf[j]-'0')
			j++
		}
		if j-i <= 9 && (j == len(buf) || buf[j] != '.' && buf[j] != 'e' && buf[j] != 'E') {
			d.pos = j
			if neg {
				v = -v
			}
			return v, true
		}
		v = 0
	}
	c := d.ws()
	if c == 'n' {
		d.literal("null")
		return 0, false
	}
	if c != '-' && (c < '0' || c > '9') {
		d.fail("cannot decode " + d.kindAt() + " into an integer")
		return 0, false
	}
	num := d.number()
	if d.err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(unsafe.String(&num[0], len(num)), 10, bits)
	if err != nil {
		d.pos -= len(num)
		d.fail("cannot decode number " + string(num) + " into int" + strconv.Itoa(bits))
		return 0, false
	}
	return v, true
}

// setInt32 assigns an int32; null leaves *p unchanged.
func (d *decoder) setInt32(p *int32) {
	if v, ok := d.integer(32); ok {
		*p = int32(v)
	}
}

// setInt64 assigns an int64; null leaves *p unchanged.
func (d *decoder) setInt64(p *int64) {
	if v, ok := d.integer(64); ok {
		*p = v
	}
}

// setUint64 assigns a uint64; null leaves *p unchanged.
func (d *decoder) setUint64(p *uint64) {
	c := d.ws()
	if c == 'n' {
		d.literal("null")
		return
	}
	if c < '0' || c > '9' {
		d.fail("cannot decode " + d.kindAt() + " into an unsigned integer")
		return
	}
	num := d.number()
	if d.err != nil {
		return
	}
	v, err := strconv.ParseUint(string(num), 10, 64)
	if err != nil {
		d.pos -= len(num)
		d.fail("cannot decode number " + string(num) + " into uint64")
		return
	}
	*p = v
}

// setStrings assigns a []string, reusing its backing array like
// encoding/json; null sets it to nil.
func (d *decoder) setStrings(p *[]string) {
	if *p != nil {
		// A duplicate key: reuse the slice like encoding/json.
		s := (*p)[:0]
		isNull := false
		for n := 0; d.elem(&n, &isNull); {
			s = append(s, "")
			d.setStr(&s[len(s)-1])
		}
		*p = finishSlice(s, isNull, d.err)
		return
	}
	// Elements go to the end of the strs arena; the block moves when full,
	// so the slice is taken from wherever its elements ended up.
	if cap(d.strs)-len(d.strs) < 8 {
		d.strs = make([]string, 0, 64)
	}
	start := len(d.strs)
	isNull := false
	for n := 0; d.elem(&n, &isNull); {
		if len(d.strs) == cap(d.strs) {
			moved := make([]string, len(d.strs)-start, 2*(len(d.strs)-start)+64)
			copy(moved, d.strs[start:])
			d.strs, start = moved, 0
		}
		d.strs = append(d.strs, "")
		d.setStr(&d.strs[len(d.strs)-1])
	}
	if isNull || d.err != nil {
		*p = nil
		return
	}
	*p = d.strs[start:len(d.strs):len(d.strs)]
}

// setInt64s assigns a []int64; null sets it to nil.
func (d *decoder) setInt64s(p *[]int64) {
	s := (*p)[:0]
	isNull := false
	for n := 0; d.elem(&n, &isNull); {
		s = append(s, 0)
		d.setInt64(&s[len(s)-1])
	}
	*p = finishSlice(s, isNull, d.err)
}

// finishSlice turns the decoded s into the value encoding/json would leave:
// nil for null, non-nil for [].
func finishSlice[T any](s []T, isNull bool, err error) []T {
	if isNull {
		return nil
	}
	if s == nil && err == nil {
		return []T{}
	}
	return s
}

// decodeArray decodes a JSON array into *p, one element with each, taking
// the elements from arena (blocks of block elements) rather than growing a
// slice per array. A non-nil *p (a duplicate key) is reused element by
// element, like encoding/json does.
func decodeArray[T any](d *decoder, p *[]T, arena *[]T, block int, each func(*decoder, *T)) {
	isNull := false
	if *p != nil {
		s := (*p)[:0]
		for n := 0; d.elem(&n, &isNull); {
			each(d, grow(&s))
		}
		*p = finishSlice(s, isNull, d.err)
		return
	}
	a := *arena
	if cap(a)-len(a) < 2 {
		a = make([]T, 0, block)
	}
	start := len(a)
	var zero T
	for n := 0; d.elem(&n, &isNull); {
		if len(a) == cap(a) {
			moved := make([]T, len(a)-start, 2*(len(a)-start)+block)
			copy(moved, a[start:])
			a, start = moved, 0
		}
		a = append(a, zero)
		each(d, &a[len(a)-1])
	}
	*arena = a
	if isNull || d.err != nil {
		*p = nil
		return
	}
	*p = a[start:len(a):len(a)]
}

// grow extends s by one element, reusing the element left in the backing
// array (encoding/json decodes into it, merging), and returns the new element.
func grow[T any](s *[]T) *T {
	if len(*s) < cap(*s) {
		*s = (*s)[:len(*s)+1]
	} else {
		var zero T
		*s = append(*s, zero)
	}
	return &(*s)[len(*s)-1]
}

// setStringMap assigns a map[string]string, adding to an existing map like
// encoding/json; null sets it to nil. Numbers are accepted as their literal
// text when numbers is set (Kubernetes quantities).
func (d *decoder) setStringMap(p *map[string]string, numbers bool) {
	if d.null() {
		*p = nil
		return
	}
	m := *p
	for n := 0; d.field(&n); {
		if m == nil {
			m = make(map[string]string)
		}
		k := aliasStr(d.key)
		if numbers {
			if c := d.ws(); c == '-' || ('0' <= c && c <= '9') {
				m[k] = aliasStr(d.number())
				continue
			}
		}
		if d.null() {
			m[k] = ""
			continue
		}
		if d.ws() != '"' {
			d.fail("cannot decode " + d.kindAt() + " into a string")
			return
		}
		var v string
		d.setStr(&v)
		m[k] = v
	}
	if m == nil && d.err == nil {
		m = map[string]string{}
	}
	*p = m
}

// raw skips one value and returns its bytes (aliasing buf).
func (d *decoder) raw() []byte {
	d.ws()
	from := d.pos
	d.skip()
	return d.buf[from:d.pos]
}

// span is raw for parts decoded later, if ever (an admission's node and
// podsOnNode): an array or object is stepped over by tracking only strings
// and nesting, eight bytes per step, without validating it; decoding it
// later validates it. With 30 pods on the node, podsOnNode is 120 KB that
// every plugin had to validate on every call. Scalars go through skip.
func (d *decoder) span() []byte {
	buf := d.buf
	c := d.ws()
	from := d.pos
	if c != '[' && c != '{' {
		d.skip()
		return buf[from:d.pos]
	}
	const (
		quotes  = '"' * ones
		slashes = '\\' * ones
		opens   = '{' * ones // '[' | 0x20
		closes  = '}' * ones // ']' | 0x20
		lower   = 0x20 * ones
	)
	depth, inStr := 0, false
	for i := from; i < len(buf); i++ {
		// One loop, no calls: the next quote, and in a string the next
		// backslash, outside one the next bracket (w|0x20 turns '[' into
		// '{' and ']' into '}', and nothing else into either).
		if i+8 <= len(buf) {
			w := *(*uint64)(unsafe.Pointer(&buf[i]))
			q := w ^ quotes
			m := (q - ones) &^ q
			if inStr {
				b := w ^ slashes
				m |= (b - ones) &^ b
			} else {
				x := w | lower
				o, e := x^opens, x^closes
				m |= (o-ones)&^o | (e-ones)&^e
			}
			if m &= highs; m == 0 {
				i += 7
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		c := buf[i]
		if inStr {
			if c == '"' {
				inStr = false
			} else if c == '\\' {
				i++ // the escaped byte
			}
			continue
		}
		switch c | 0x20 {
		case '"':
			inStr = true
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				d.pos = i + 1
				return buf[from : i+1]
			}
		}
	}
	d.pos = len(buf)
	d.fail("unexpected end of JSON input")
	return nil
}

// skip validates and steps over one value of any type. It is one
// iterative function working on locals: in Go's wasm code every call costs
// far more than a byte comparison, and most of a pod is skipped.
func (d *decoder) skip() {
	if d.err != nil {
		return
	}
	buf := d.buf
	i := d.pos
	// stack holds, per open container, '{' or '['.
	var small [32]byte
	stack := small[:0]
	var c byte
	msg := ""

value:
	for i < len(buf) && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r') {
		i++
	}
	if i >= len(buf) {
		msg = "unexpected end of JSON input"
		goto fail
	}
	switch c = buf[i]; c {
	case '"':
		goto str
	case '{', '[':
		i++
		for i < len(buf) && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r') {
			i++
		}
		if i < len(buf) && buf[i] == c+2 { // '}' and ']' follow their openers by 2
			i++
			goto after
		}
		if len(stack) >= maxDepth {
			msg = "exceeded max depth"
			goto fail
		}
		stack = append(stack, c)
		if c == '{' {
			goto key
		}
		goto value
	case 't', 'f', 'n':
		lit := literals[c]
		if len(buf)-i < len(lit) || string(buf[i:i+len(lit)]) != lit {
			msg = "invalid literal"
			goto fail
		}
		i += len(lit)
		goto after
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			d.pos = i
			d.number()
			if d.err != nil {
				return
			}
			i = d.pos
			goto after
		}
		msg = "invalid character " + strconv.QuoteRune(rune(c)) + " looking for beginning of value"
		goto fail
	}

key: // at an object member's key, whitespace skipped
	if i >= len(buf) || buf[i] != '"' {
		msg = "expected string for object key"
		goto fail
	}
	// Fast path: a plain key right before its ':' (compact JSON), straight
	// to the value, scanned inline (see specials).
	if j := plainWords(buf, i+1); j+8 <= len(buf) && buf[j] == '"' && buf[j+1] == ':' {
		i = j + 2
		goto value
	}
	// A key is a string followed by ':'; stack top '{' and the colon check
	// in after tell the two apart.
	stack = append(stack, ':')
	goto str

str: // buf[i] is the opening quote
	i++
	for i < len(buf) {
		if i = plainWords(buf, i); i+8 > len(buf) {
			i = scanPlain(buf, i)
		}
		if i >= len(buf) {
			break
		}
		c = buf[i]
		if c == '"' {
			i++
			goto after
		}
		if c < 0x20 {
			msg = "invalid control character in string"
			goto fail
		}
		if c == '\\' {
			if i+1 >= len(buf) {
				break
			}
			switch buf[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(buf[i+2:]) < 0 {
					msg = "invalid \\u escape in string"
					goto fail
				}
				i += 6
			default:
				msg = "invalid escape in string"
				goto fail
			}
			continue
		}
		i++ // a non-ASCII byte: any is fine when skipping
	}
	msg = "unterminated string"
	goto fail

after: // a value (or a key) ended at i
	if len(stack) == 0 {
		d.pos = i
		return
	}
	for i < len(buf) && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r') {
		i++
	}
	if i >= len(buf) {
		msg = "unexpected end of JSON input"
		goto fail
	}
	c = buf[i]
	switch stack[len(stack)-1] {
	case ':': // a key ended
		stack = stack[:len(stack)-1]
		if c != ':' {
			msg = "expected ':' after object key"
			goto fail
		}
		i++
		goto value
	case '{':
		if c == ',' {
			i++
			for i < len(buf) && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r') {
				i++
			}
			goto key
		}
		if c == '}' {
			i++
			stack = stack[:len(stack)-1]
			goto after
		}
		msg = "expected ',' or '}' in object"
		goto fail
	default: // '['
		if c == ',' {
			i++
			goto value
		}
		if c == ']' {
			i++
			stack = stack[:len(stack)-1]
			goto after
		}
		msg = "expected ',' or ']' in array"
		goto fail
	}

fail:
	d.pos = i
	d.fail(msg)
}

// literals maps the first letter of a JSON literal to the literal.
var literals = [256]string{'t': "true", 'f': "false", 'n': "null"}

// kindAt names the JSON type of the next value, for error messages.
func (d *decoder) kindAt() string {
	switch c := d.ws(); {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "bool"
	case c == 'n':
		return "null"
	case c == '-' || ('0' <= c && c <= '9'):
		return "number"
	case c == 0:
		return "end of input"
	}
	return "invalid character"
}
