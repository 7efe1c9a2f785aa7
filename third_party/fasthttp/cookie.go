package fasthttp

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"time"
)

var zeroTime time.Time

var (
	// CookieExpireDelete may be set on Cookie.Expire for expiring the given cookie.
	CookieExpireDelete = time.Date(2009, time.November, 10, 23, 0, 0, 0, time.UTC)

	// CookieExpireUnlimited indicates that the cookie doesn't expire.
	CookieExpireUnlimited = zeroTime
)

// CookieSameSite is an enum for the mode in which the SameSite flag should be set for the given cookie.
// See https://tools.ietf.org/html/draft-ietf-httpbis-cookie-same-site-00 for details.
type CookieSameSite int

const (
	// CookieSameSiteDisabled removes the SameSite flag.
	CookieSameSiteDisabled CookieSameSite = iota
	// CookieSameSiteDefaultMode sets the SameSite flag.
	CookieSameSiteDefaultMode
	// CookieSameSiteLaxMode sets the SameSite flag with the "Lax" parameter.
	CookieSameSiteLaxMode
	// CookieSameSiteStrictMode sets the SameSite flag with the "Strict" parameter.
	CookieSameSiteStrictMode
	// CookieSameSiteNoneMode sets the SameSite flag with the "None" parameter.
	// See https://tools.ietf.org/html/draft-west-cookie-incrementalism-00
	CookieSameSiteNoneMode // third-party cookies are phasing out, use Partitioned cookies instead
)

// AcquireCookie returns an empty Cookie object from the pool.
//
// The returned object may be returned back to the pool with ReleaseCookie.
// This allows reducing GC load.
func AcquireCookie() *Cookie {
	return cookiePool.Get().(*Cookie) //nolint:forcetypeassert
}

// ReleaseCookie returns the Cookie object acquired with AcquireCookie back
// to the pool.
//
// Do not access released Cookie object, otherwise data races may occur.
func ReleaseCookie(c *Cookie) {
	c.Reset()
	cookiePool.Put(c)
}

var cookiePool = &sync.Pool{
	New: func() any {
		return &Cookie{}
	},
}

// Cookie represents HTTP response cookie.
//
// Do not copy Cookie objects. Create new object and use CopyTo instead.
//
// Cookie instance MUST NOT be used from concurrently running goroutines.
type Cookie struct {
	noCopy noCopy

	expire time.Time

	key    []byte
	value  []byte
	domain []byte
	path   []byte

	bufK []byte
	bufV []byte

	// maxAge=0 means no 'max-age' attribute specified.
	// maxAge<0 means delete cookie now, equivalently 'max-age=0'
	// maxAge>0 means 'max-age' attribute present and given in seconds
	maxAge int

	sameSite    CookieSameSite
	httpOnly    bool
	secure      bool
	partitioned bool
}

// CopyTo copies src cookie to c.
func (c *Cookie) CopyTo(src *Cookie) {
	c.Reset()
	c.key = append(c.key, src.key...)
	c.value = append(c.value, src.value...)
	c.expire = src.expire
	c.maxAge = src.maxAge
	c.domain = append(c.domain, src.domain...)
	c.path = append(c.path, src.path...)
	c.httpOnly = src.httpOnly
	c.secure = src.secure
	c.sameSite = src.sameSite
	c.partitioned = src.partitioned
}

// HTTPOnly returns true if the cookie is http only.
func (c *Cookie) HTTPOnly() bool {
	return c.httpOnly
}

// SetHTTPOnly sets cookie's httpOnly flag to the given value.
func (c *Cookie) SetHTTPOnly(httpOnly bool) {
	c.httpOnly = httpOnly
}

// Secure returns true if the cookie is secure.
func (c *Cookie) Secure() bool {
	return c.secure
}

// SetSecure sets cookie's secure flag to the given value.
func (c *Cookie) SetSecure(secure bool) {
	c.secure = secure
}

// SameSite returns the SameSite mode.
func (c *Cookie) SameSite() CookieSameSite {
	return c.sameSite
}

// SetSameSite sets the cookie's SameSite flag to the given value.
// Set value CookieSameSiteNoneMode will set Secure to true also to avoid browser rejection.
func (c *Cookie) SetSameSite(mode CookieSameSite) {
	c.sameSite = mode
	if mode == CookieSameSiteNoneMode {
		c.SetSecure(true)
	}
}

// Partitioned returns true if the cookie is partitioned.
func (c *Cookie) Partitioned() bool {
	return c.partitioned
}

// SetPartitioned sets the cookie's Partitioned flag to the given value.
// Set value Partitioned to true will set Secure to true and Path to / also to avoid browser rejection.
func (c *Cookie) SetPartitioned(partitioned bool) {
	c.partitioned = partitioned
	if partitioned {
		c.SetSecure(true)
		c.SetPath("/")
	}
}

// Path returns cookie path.
func (c *Cookie) Path() []byte {
	return c.path
}

// SetPath sets cookie path.
func (c *Cookie) SetPath(path string) {
	c.bufK = append(c.bufK[:0], path...)
	c.path = normalizePath(c.path, c.bufK)
	c.path = removeNewLines(c.path)
	c.path = removeSemicolons(c.path)
}

// SetPathBytes sets cookie path.
func (c *Cookie) SetPathBytes(path []byte) {
	c.bufK = append(c.bufK[:0], path...)
	c.path = normalizePath(c.path, c.bufK)
	c.path = removeNewLines(c.path)
	c.path = removeSemicolons(c.path)
}

// Domain returns cookie domain.
//
// The returned value is valid until the Cookie reused or released (ReleaseCookie).
// Do not store references to the returned value. Make copies instead.
func (c *Cookie) Domain() []byte {
	return c.domain
}

// SetDomain sets cookie domain.
func (c *Cookie) SetDomain(domain string) {
	c.domain = initHeaderValueString(c.domain, domain)
	c.domain = removeSemicolons(c.domain)
}

// SetDomainBytes sets cookie domain.
func (c *Cookie) SetDomainBytes(domain []byte) {
	c.domain = initHeaderValueBytes(c.domain, domain)
	c.domain = removeSemicolons(c.domain)
}

// MaxAge returns the seconds until the cookie is meant to expire or 0
// if no max age.
func (c *Cookie) MaxAge() int {
	return c.maxAge
}

// SetMaxAge sets cookie expiration time based on seconds. This takes precedence
// over any absolute expiry set on the cookie.
//
// 'max-age' is set when the maxAge is non-zero. That is, if maxAge = 0,
// the 'max-age' is unset. If maxAge < 0, it indicates that the cookie should
// be deleted immediately, equivalent to 'max-age=0'. This behavior is
// consistent with the Go standard library's net/http package.
func (c *Cookie) SetMaxAge(seconds int) {
	c.maxAge = seconds
}

// Expire returns cookie expiration time.
//
// CookieExpireUnlimited is returned if cookie doesn't expire.
func (c *Cookie) Expire() time.Time {
	expire := c.expire
	if expire.IsZero() {
		expire = CookieExpireUnlimited
	}
	return expire
}

// SetExpire sets cookie expiration time.
//
// Set expiration time to CookieExpireDelete for expiring (deleting)
// the cookie on the client.
//
// By default cookie lifetime is limited by browser session.
func (c *Cookie) SetExpire(expire time.Time) {
	c.expire = expire
}

// Value returns cookie value.
//
// The returned value is valid until the Cookie reused or released (ReleaseCookie).
// Do not store references to the returned value. Make copies instead.
func (c *Cookie) Value() []byte {
	return c.value
}

// SetValue sets cookie value.
func (c *Cookie) SetValue(value string) {
	c.value = initHeaderValueString(c.value, value)
	c.value = removeSemicolons(c.value)
}

// SetValueBytes sets cookie value.
func (c *Cookie) SetValueBytes(value []byte) {
	c.value = initHeaderValueBytes(c.value, value)
	c.value = removeSemicolons(c.value)
}

// Key returns cookie name.
//
// The returned value is valid until the Cookie reused or released (ReleaseCookie).
// Do not store references to the returned value. Make copies instead.
func (c *Cookie) Key() []byte {
	return c.key
}

// SetKey sets cookie name.
func (c *Cookie) SetKey(key string) {
	c.key = initHeaderValueString(c.key, key)
	c.key = removeSemicolons(c.key)
}

// SetKeyBytes sets cookie name.
func (c *Cookie) SetKeyBytes(key []byte) {
	c.key = initHeaderValueBytes(c.key, key)
	c.key = removeSemicolons(c.key)
}

// Reset clears the cookie.
func (c *Cookie) Reset() {
	c.key = c.key[:0]
	c.value = c.value[:0]
	c.expire = zeroTime
	c.maxAge = 0
	c.domain = c.domain[:0]
	c.path = c.path[:0]
	c.httpOnly = false
	c.secure = false
	c.sameSite = CookieSameSiteDisabled
	c.partitioned = false
}

// AppendBytes appends cookie representation to dst and returns
// the extended dst.
func (c *Cookie) AppendBytes(dst []byte) []byte {
	if len(c.key) > 0 {
		dst = append(dst, c.key...)
		dst = append(dst, '=')
	}
	dst = append(dst, c.value...)

	if c.maxAge != 0 {
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieMaxAge...)
		dst = append(dst, '=')
		if c.maxAge < 0 {
			// See https://github.com/valyala/fasthttp/issues/1900
			dst = AppendUint(dst, 0)
		} else {
			dst = AppendUint(dst, c.maxAge)
		}
	} else if !c.expire.IsZero() {
		c.bufV = AppendHTTPDate(c.bufV[:0], c.expire)
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieExpires...)
		dst = append(dst, '=')
		dst = append(dst, c.bufV...)
	}
	if len(c.domain) > 0 {
		dst = appendCookiePart(dst, strCookieDomain, c.domain)
	}
	if len(c.path) > 0 {
		dst = appendCookiePart(dst, strCookiePath, c.path)
	}
	if c.httpOnly {
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieHTTPOnly...)
	}
	if c.secure {
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieSecure...)
	}
	switch c.sameSite {
	case CookieSameSiteDefaultMode:
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieSameSite...)
	case CookieSameSiteLaxMode:
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieSameSite...)
		dst = append(dst, '=')
		dst = append(dst, strCookieSameSiteLax...)
	case CookieSameSiteStrictMode:
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieSameSite...)
		dst = append(dst, '=')
		dst = append(dst, strCookieSameSiteStrict...)
	case CookieSameSiteNoneMode:
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookieSameSite...)
		dst = append(dst, '=')
		dst = append(dst, strCookieSameSiteNone...)
	}
	if c.partitioned {
		dst = append(dst, ';', ' ')
		dst = append(dst, strCookiePartitioned...)
	}
	return dst
}

// Cookie returns cookie representation.
//
// The returned value is valid until the Cookie reused or released (ReleaseCookie).
// Do not store references to the returned value. Make copies instead.
func (c *Cookie) Cookie() []byte {
	c.bufK = c.AppendBytes(c.bufK[:0])
	return c.bufK
}

// String returns cookie representation.
func (c *Cookie) String() string {
	return string(c.Cookie())
}

// WriteTo writes cookie representation to w.
//
// WriteTo implements io.WriterTo interface.
func (c *Cookie) WriteTo(w io.Writer) (int64, error) {
	b := c.Cookie()
	n, err := w.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return int64(n), err
}

var (
	ErrNoCookies          = errors.New("fasthttp: no cookies found")
	ErrInvalidCookieValue = errors.New("fasthttp: invalid cookie value")
)

// Parse parses Set-Cookie header.
func (c *Cookie) Parse(src string) error {
	c.bufK = append(c.bufK[:0], src...)
	return c.ParseBytes(c.bufK)
}

// ParseBytes parses Set-Cookie header.
//
// An error is returned only when the name or the value can't be used. As
// RFC 6265, section 5.2 asks, an attribute that can't be used is ignored and
// the ones after it are parsed as usual. That goes for an Expires or Max-Age
// that isn't valid, and for a Domain or Path that holds bytes a cookie can't
// carry.
func (c *Cookie) ParseBytes(src []byte) error {
	c.Reset()

	var s cookieScanner
	s.b = src

	var k, v []byte
	if !s.nextRaw(&k, &v) {
		return ErrNoCookies
	}
	if !validCookieValue(v) {
		return ErrInvalidCookieValue
	}

	c.key = initHeaderValueBytes(c.key, k)
	c.value = initHeaderValueBytes(c.value, v)

	for s.nextRaw(&k, &v) {
		if len(k) != 0 {
			// Case insensitive switch on first char
			switch k[0] | 0x20 {
			case 'm':
				if caseInsensitiveCompare(strCookieMaxAge, k) {
					// RFC 6265, section 5.2.2: a Max-Age of zero or less
					// expires the cookie immediately, and a value that isn't
					// a number is ignored, not the whole cookie.
					negative := len(v) > 0 && v[0] == '-'
					if negative {
						v = v[1:]
					}
					if maxAge, err := ParseUint(v); err == nil {
						if maxAge == 0 || negative {
							maxAge = -1
						}
						c.maxAge = maxAge
					}
				}

			case 'e': // "expires"
				if caseInsensitiveCompare(strCookieExpires, k) {
					// RFC 6265, section 5.2.1: an Expires value that isn't
					// a valid date is ignored, not the whole cookie.
					if exptime, err := parseCookieExpires(v); err == nil {
						c.expire = exptime
					}
				}

			case 'd': // "domain"
				if caseInsensitiveCompare(strCookieDomain, k) {
					// RFC 6265, section 5.2: a Domain that can't be used is
					// ignored, not the whole cookie. The cookie then stays
					// host-only.
					if validCookieValue(v) {
						c.domain = initHeaderValueBytes(c.domain, v)
					}
				}

			// RFC 6265, sections 5.2.5 and 5.2.6: Secure and HttpOnly are
			// matched by name alone, so a value after them is ignored.
			// Partitioned works the same way.
			case 'h': // "httponly"
				if caseInsensitiveCompare(strCookieHTTPOnly, k) {
					c.httpOnly = true
				}

			case 'p': // "path" or "partitioned"
				if caseInsensitiveCompare(strCookiePath, k) {
					// A Path that can't be used is ignored like a Domain,
					// and the cookie gets the default path.
					if validCookiePathValue(v) {
						c.path = initHeaderValueBytes(c.path, v)
					}
				} else if caseInsensitiveCompare(strCookiePartitioned, k) {
					c.partitioned = true
				}

			case 's': // "samesite" or "secure"
				if caseInsensitiveCompare(strCookieSecure, k) {
					c.secure = true
				} else if caseInsensitiveCompare(strCookieSameSite, k) {
					if len(v) > 0 {
						// Case insensitive switch on first char
						switch v[0] | 0x20 {
						case 'l': // "lax"
							if caseInsensitiveCompare(strCookieSameSiteLax, v) {
								c.sameSite = CookieSameSiteLaxMode
							}
						case 's': // "strict"
							if caseInsensitiveCompare(strCookieSameSiteStrict, v) {
								c.sameSite = CookieSameSiteStrictMode
							}
						case 'n': // "none"
							if caseInsensitiveCompare(strCookieSameSiteNone, v) {
								c.sameSite = CookieSameSiteNoneMode
							}
						}
					}
				}
			}
		} else if len(v) != 0 {
			// Case insensitive switch on first char
			switch v[0] | 0x20 {
			case 'h': // "httponly"
				if caseInsensitiveCompare(strCookieHTTPOnly, v) {
					c.httpOnly = true
				}

			case 's': // "secure"
				if caseInsensitiveCompare(strCookieSecure, v) {
					c.secure = true
				} else if caseInsensitiveCompare(strCookieSameSite, v) {
					c.sameSite = CookieSameSiteDefaultMode
				}
			case 'p': // "partitioned"
				if caseInsensitiveCompare(strCookiePartitioned, v) {
					c.partitioned = true
				}
			}
		} // else empty or no match
	}
	return nil
}

// removeSemicolons replaces every ';' in raw with a space.
//
// ';' separates attributes inside a Set-Cookie header, so a ';' carried in a
// key, value, domain or path taken from untrusted input would let an attacker
// append arbitrary attributes (Domain, Path, Secure, ...) to the cookie. CR and
// LF are already neutralised by removeNewLines.
func removeSemicolons(raw []byte) []byte {
	for i := range raw {
		if raw[i] == ';' {
			raw[i] = ' '
		}
	}
	return raw
}

func appendCookiePart(dst, key, value []byte) []byte {
	dst = append(dst, ';', ' ')
	dst = append(dst, key...)
	dst = append(dst, '=')
	return append(dst, value...)
}

// getCookieKey returns the key of a Set-Cookie value the same way
// Cookie.ParseBytes does: a cookie without '=' in its name-value pair,
// such as "sid; Path=/", has an empty key.
func getCookieKey(dst, src []byte) []byte {
	if n := bytes.IndexByte(src, ';'); n >= 0 {
		src = src[:n]
	}
	n := bytes.IndexByte(src, '=')
	if n < 0 {
		return dst[:0]
	}
	return decodeCookieArg(dst, src[:n], false)
}

func appendRequestCookieBytes(dst []byte, cookies []argsKV) []byte {
	for i := range cookies {
		if i != 0 {
			dst = append(dst, ';', ' ')
		}
		kv := &cookies[i]
		if len(kv.key) > 0 {
			dst = append(dst, kv.key...)
			dst = append(dst, '=')
		} else if slices.Contains(kv.value, '=') {
			// Preserve the empty name if the value could be read as a name=value pair.
			dst = append(dst, '=')
		}
		dst = append(dst, kv.value...)
	}
	return dst
}

// For Response we can not use the above function as response cookies
// already contain the key= in the value.
func appendResponseCookieBytes(dst []byte, cookies []argsKV) []byte {
	for i, n := 0, len(cookies); i < n; i++ {
		kv := &cookies[i]
		dst = append(dst, kv.value...)
		if i+1 < n {
			dst = append(dst, ';', ' ')
		}
	}
	return dst
}

func parseRequestCookies(cookies []argsKV, src []byte) []argsKV {
	var s cookieScanner
	s.b = src
	var kv *argsKV
	cookies, kv = allocArg(cookies)
	for s.next(&kv.key, &kv.value) {
		if len(kv.key) > 0 || len(kv.value) > 0 {
			if validCookieValue(kv.value) {
				cookies, kv = allocArg(cookies)
			}
		}
	}
	return releaseArg(cookies)
}

type cookieScanner struct {
	b []byte
}

func (s *cookieScanner) nextRaw(key, val *[]byte) bool {
	b := s.b
	if len(b) == 0 {
		return false
	}

	isKey := true
	k := 0
	for i, c := range b {
		switch c {
		case '=':
			if isKey {
				isKey = false
				*key = trimCookieArgNoCopy(b[:i], false)
				k = i + 1
			}
		case ';':
			if isKey {
				*key = (*key)[:0]
			}
			*val = trimCookieArgNoCopy(b[k:i], true)
			j := i + 1
			if j < len(b) && b[j] == ' ' {
				j++
			}
			s.b = b[j:]
			return true
		}
	}

	if isKey {
		*key = (*key)[:0]
	}
	*val = trimCookieArgNoCopy(b[k:], true)
	s.b = b[len(b):]
	return true
}

func (s *cookieScanner) next(key, val *[]byte) bool {
	b := s.b
	if len(b) == 0 {
		return false
	}

	isKey := true
	k := 0
	for i, c := range b {
		switch c {
		case '=':
			if isKey {
				isKey = false
				*key = decodeCookieArg(*key, b[:i], false)
				k = i + 1
			}
		case ';':
			if isKey {
				*key = (*key)[:0]
			}
			*val = decodeCookieArg(*val, b[k:i], true)
			j := i + 1
			if j < len(b) && b[j] == ' ' {
				j++
			}
			s.b = b[j:]
			return true
		}
	}

	if isKey {
		*key = (*key)[:0]
	}
	*val = decodeCookieArg(*val, b[k:], true)
	s.b = b[len(b):]
	return true
}

func decodeCookieArg(dst, src []byte, skipQuotes bool) []byte {
	// Fast path: already trimmed and not quoted.
	if n := len(src); n > 0 && src[0] != ' ' && src[0] != '\t' &&
		src[n-1] != ' ' && src[n-1] != '\t' &&
		(!skipQuotes || n < 2 || src[0] != '"' || src[n-1] != '"') {
		return append(dst[:0], src...)
	}

	src = trim(src)
	if skipQuotes {
		if len(src) > 1 && src[0] == '"' && src[len(src)-1] == '"' {
			src = src[1 : len(src)-1]
		}
	}
	return append(dst[:0], src...)
}

func validCookieValue(value []byte) bool {
	for _, c := range value {
		if c == '"' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

// validCookiePathValue reports whether value is acceptable as a cookie Path.
//
// Unlike validCookieValue it permits '"' and '\', which are legal path
// characters accepted by SetPath and net/http's Cookie.String. It rejects the
// ';' attribute separator and every byte outside 0x20-0x7e, matching
// net/http's validCookiePathByte. CR and LF are tolerated here because
// initHeaderValueBytes strips them afterwards, the same as for the primary
// cookie value.
func validCookiePathValue(value []byte) bool {
	for _, b := range value {
		if b == '\r' || b == '\n' {
			continue
		}
		if b < 0x20 || b >= 0x7f || b == ';' {
			return false
		}
	}
	return true
}

func trimCookieArgNoCopy(src []byte, skipQuotes bool) []byte {
	src = trim(src)
	if skipQuotes && len(src) > 1 && src[0] == '"' && src[len(src)-1] == '"' {
		src = src[1 : len(src)-1]
	}
	return src
}

// caseInsensitiveCompare does a case insensitive equality comparison of
// two []byte. Assumes only letters need to be matched.
func parseCookieExpires(src []byte) (time.Time, error) {
	if t, ok := parseRFC1123DateGMT(src); ok {
		return t, nil
	}

	s := b2s(src)

	// UTC-anchored RFC1123 parsing behavior for non-GMT.
	t, err := time.ParseInLocation(time.RFC1123, s, time.UTC)
	if err == nil {
		return t, nil
	}

	// Legacy cookie date compatibility used by net/http.
	return time.Parse("Mon, 02-Jan-2006 15:04:05 MST", s)
}

func caseInsensitiveCompare(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if toLowerTable[a[i]] != toLowerTable[b[i]] {
			return false
		}
	}
	return true
}

// caseInsensitiveHasPrefix reports whether b begins with prefix,
// ignoring ASCII case.
func caseInsensitiveHasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && caseInsensitiveCompare(b[:len(prefix)], prefix)
}
