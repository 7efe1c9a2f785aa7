package chat

import (
	"strconv"
	"time"
)

// strftime formats t the way Python's datetime.strftime does for the C
// locale directives templates use (%a %A %b %B %d %e %H %I %j %m %M %p %S %y
// %Y %z %Z %%, and glibc's %-d style no-padding flag). Unknown directives are
// copied as they are, as glibc does.
func strftime(t time.Time, format string) string {
	b := make([]byte, 0, len(format)+16)
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b = append(b, c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			for k := len(s); pad && k < width; k++ {
				b = append(b, '0')
			}
			b = append(b, s...)
		}
		switch format[i] {
		case 'a':
			b = append(b, t.Weekday().String()[:3]...)
		case 'A':
			b = append(b, t.Weekday().String()...)
		case 'b', 'h':
			b = append(b, t.Month().String()[:3]...)
		case 'B':
			b = append(b, t.Month().String()...)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if d := t.Day(); d < 10 && pad {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, int64(t.Day()), 10)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			if t.Hour() < 12 {
				b = append(b, "AM"...)
			} else {
				b = append(b, "PM"...)
			}
		case 'S':
			num(t.Second(), 2)
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			b = strconv.AppendInt(b, int64(t.Year()), 10)
		case 'z':
			b = append(b, t.Format("-0700")...)
		case 'Z':
			b = append(b, t.Format("MST")...)
		case '%':
			b = append(b, '%')
		default:
			b = append(b, '%')
			if !pad {
				b = append(b, '-')
			}
			b = append(b, format[i])
		}
	}
	return string(b)
}
