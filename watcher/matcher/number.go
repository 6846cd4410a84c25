package matcher

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// maxSafe is 2^53: every integer up to it is exact as a float64, and
// beyond it float64 rounds, so 12345678901234567891 and
// 12345678901234567890 would compare equal.
const maxSafe = "9007199254740992"

// decimal is a JSON number read exactly from its text: its value is
// 0.digits × 10^exp, negative when neg. digits has no leading or trailing
// zeros; it is empty for zero.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// maxExpDigits bounds the exponent a decimal is read with; a number with
// a longer exponent is out of float64's range or rounds to zero anyway.
const maxExpDigits = 6

// parseDecimal reads a JSON number's text exactly; false when it is not
// one or its exponent is out of bounds.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	intPart, rest := leadingDigits(s)
	if intPart == "" {
		return decimal{}, false
	}
	var frac string
	if strings.HasPrefix(rest, ".") {
		frac, rest = leadingDigits(rest[1:])
		if frac == "" {
			return decimal{}, false
		}
	}
	e := 0
	if rest != "" {
		if rest[0] != 'e' && rest[0] != 'E' {
			return decimal{}, false
		}
		rest = rest[1:]
		eneg := false
		if rest != "" && (rest[0] == '+' || rest[0] == '-') {
			eneg, rest = rest[0] == '-', rest[1:]
		}
		ed, tail := leadingDigits(rest)
		ed = strings.TrimLeft(ed, "0")
		if tail != "" || rest == "" || len(ed) > maxExpDigits {
			return decimal{}, false
		}
		if ed != "" {
			e, _ = strconv.Atoi(ed)
		}
		if eneg {
			e = -e
		}
	}
	all := intPart + frac
	point := len(intPart)
	trimmed := strings.TrimLeft(all, "0")
	point -= len(all) - len(trimmed)
	d.digits = strings.TrimRight(trimmed, "0")
	d.exp = point + e
	if d.digits == "" {
		d.neg, d.exp = false, 0
	}
	return d, true
}

func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}

// integer reports whether d is a whole number.
func (d decimal) integer() bool { return d.exp >= len(d.digits) }

// big reports whether d is an integer beyond 2^53 in magnitude, the
// numbers float64 cannot hold exactly.
func (d decimal) big() bool {
	if d.digits == "" || !d.integer() {
		return false
	}
	switch {
	case d.exp > len(maxSafe):
		return true
	case d.exp < len(maxSafe):
		return false
	}
	return d.text() > maxSafe
}

// text spells an integer's magnitude in decimal digits.
func (d decimal) text() string {
	return d.digits + strings.Repeat("0", d.exp-len(d.digits))
}

// sign returns -1, 0 or 1.
func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmpDecimal compares a and b exactly: -1, 0 or 1.
func cmpDecimal(a, b decimal) int {
	if sa, sb := a.sign(), b.sign(); sa != sb || sa == 0 {
		return cmpInt(sa, sb)
	}
	mag := cmpInt(a.exp, b.exp)
	if mag == 0 {
		mag = strings.Compare(a.digits, b.digits) // no trailing zeros: a prefix is smaller
	}
	if a.neg {
		return -mag
	}
	return mag
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// canonicalNumber spells a JSON number in the canonical form: an integer
// beyond 2^53 with every digit, any other number as its float64 in
// shortest form (as encoding/json writes it). false when s is not a
// number float64 can hold.
func canonicalNumber(s string) (string, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	if math.Abs(f) >= 1<<53 {
		if d, ok := parseDecimal(s); ok && d.big() {
			if d.neg {
				return "-" + d.text(), true
			}
			return d.text(), true
		}
	}
	return formatFloat(f), true
}

// formatFloat spells f as encoding/json does.
func formatFloat(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// compareNumbers compares two JSON numbers given as text for the order
// operators: exactly when either is an integer beyond 2^53, else as
// float64. ok is false when either is not a number.
func compareNumbers(x, y string) (c int, ok bool) {
	dx, okx := parseDecimal(x)
	dy, oky := parseDecimal(y)
	if okx && oky && (dx.big() || dy.big()) {
		return cmpDecimal(dx, dy), true
	}
	fx, errx := strconv.ParseFloat(x, 64)
	fy, erry := strconv.ParseFloat(y, 64)
	if errx != nil || erry != nil {
		return 0, false
	}
	switch {
	case fx < fy:
		return -1, true
	case fx > fy:
		return 1, true
	}
	return 0, true
}
