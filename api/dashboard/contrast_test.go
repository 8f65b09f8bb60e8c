package dashboard_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/greffe/greffe/aggregates"
)

// readinessStates is every state a readiness column can take
// (aggregates/readiness.go and the binding gates it reuses), plus
// "unknown", the page's own word for a column absent from the read model.
// Each must have its own class in style.css, not the fallback.
var readinessStates = []string{
	aggregates.ReadyConfigured, aggregates.ReadyLiveProven, aggregates.ReadyActivation, aggregates.ReadyDirectReplyOnly,
	aggregates.ReadyBound, aggregates.ReadyNoBindingNeeded,
	aggregates.StateNotProbed, aggregates.StateProbeFailed, aggregates.StateProbeUnreach, aggregates.StateProbeTimeout,
	aggregates.StateTagNotListed, aggregates.StateStale, aggregates.StateEndpointMissing, aggregates.StateModelTagMissing,
	aggregates.StateNotActivated,
	aggregates.CodeProviderUnknown, aggregates.CodeProviderDormant, aggregates.CodeLimitsUnknown, aggregates.CodeAliasNotExact,
	aggregates.CodeBindingUnknown, aggregates.CodeBindingRejected, aggregates.CodeBindingInvalidated, aggregates.CodeBindingNotVerified,
	aggregates.CodeBindingProviderMismatch, aggregates.CodeBindingModelMismatch, aggregates.CodeBindingRequired,
	aggregates.CodeIdentityMismatch,
	"unknown",
}

// minContrast is WCAG 2.x AA's minimum for normal text.
const minContrast = 4.5

// parseRGB reads a computed CSS colour, "rgb(r, g, b)" or "rgba(r, g, b,
// a)", into 0..255 channels and an alpha.
func parseRGB(s string) (rgb [3]float64, alpha float64, err error) {
	inner, ok := strings.CutPrefix(s, "rgba(")
	if !ok {
		inner, ok = strings.CutPrefix(s, "rgb(")
	}
	inner, ok2 := strings.CutSuffix(inner, ")")
	if !ok || !ok2 {
		return rgb, 0, fmt.Errorf("colour %q is not rgb()/rgba()", s)
	}
	parts := strings.FieldsFunc(inner, func(r rune) bool { return r == ',' || r == ' ' || r == '/' })
	if len(parts) != 3 && len(parts) != 4 {
		return rgb, 0, fmt.Errorf("colour %q: %d channels", s, len(parts))
	}
	alpha = 1
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return rgb, 0, fmt.Errorf("colour %q: %w", s, err)
		}
		if i == 3 {
			alpha = v
		} else {
			rgb[i] = v
		}
	}
	return rgb, alpha, nil
}

// luminance is WCAG's relative luminance of an sRGB colour.
func luminance(c [3]float64) float64 {
	lin := func(v float64) float64 {
		v /= 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(c[0]) + 0.7152*lin(c[1]) + 0.0722*lin(c[2])
}

// contrast is WCAG's contrast ratio of two opaque colours, 1 to 21.
func contrast(a, b [3]float64) float64 {
	la, lb := luminance(a), luminance(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestContrast_Formula checks the checker on known ratios (WebAIM's
// contrast checker gives the same figures), including the two colours
// issue #16 found below AA.
func TestContrast_Formula(t *testing.T) {
	white := [3]float64{255, 255, 255}
	tests := []struct {
		name string
		css  string
		want float64
	}{
		{"black", "rgb(0, 0, 0)", 21},
		{"white", "rgb(255, 255, 255)", 1},
		{"#777777", "rgb(119, 119, 119)", 4.48},
		{"the old stale #b28704", "rgb(178, 135, 4)", 3.30},
		{"the old limits_unknown #ef6c00", "rgba(239, 108, 0, 1)", 3.08},
		{"stale now #875a00", "rgb(135, 90, 0)", 6.01},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseRGB(tc.css)
			if err != nil {
				t.Fatal(err)
			}
			if got := contrast(c, white); math.Abs(got-tc.want) > 0.01 {
				t.Errorf("contrast(%s, white) = %.3f, want %.2f", tc.css, got, tc.want)
			}
		})
	}
	if _, _, err := parseRGB("color(srgb 1 0 0)"); err == nil {
		t.Error("parseRGB accepted a colour it cannot read")
	}
}

// stateStyle is one element drawn in a state's colour, as computed.
type stateStyle struct {
	Where, State, Color, Background, Before, Text string
	Fallback                                      bool
}

// checkStateContrast opens the page's list of every state and checks
// each element drawn in a state's colour (the matrix's cells, the legend,
// the list): its text against its own background passes AA, the
// background is opaque (so the ratio is the one seen), it carries an icon
// (::before) and its state's name, a state has one colour everywhere, and
// every known state has its own class.
func checkStateContrast(ctx context.Context, t *testing.T, p *page, fail func(string, ...any)) {
	t.Helper()
	var styles []stateStyle
	err := p.eval(ctx, `(() => {
		document.querySelector('#legend-all').open = true;
		const where = (e) => e.closest('#matrix') ? 'matrix' : e.closest('#legend-all') ? 'all' : 'legend';
		return Array.from(document.querySelectorAll('.st')).map((e) => { const cs = getComputedStyle(e); return {
			where: where(e), state: e.dataset.state, color: cs.color, background: cs.backgroundColor,
			before: getComputedStyle(e, '::before').content, text: e.textContent, fallback: e.classList.contains('st-other') }; });
	})()`, &styles)
	if err != nil {
		fail("%v", err)
	}
	listed := map[string]bool{}
	colourOf := map[string]string{}
	for _, s := range styles {
		fg, _, err1 := parseRGB(s.Color)
		bg, alpha, err2 := parseRGB(s.Background)
		if err1 != nil || err2 != nil {
			t.Errorf("%s %s: %v %v", s.Where, s.State, err1, err2)
			continue
		}
		if alpha != 1 {
			t.Errorf("%s %s: background %s is not opaque", s.Where, s.State, s.Background)
		}
		if r := contrast(fg, bg); r < minContrast {
			t.Errorf("%s %s: text %s on %s has contrast %.2f:1, below %.1f:1", s.Where, s.State, s.Color, s.Background, r, minContrast)
		}
		if s.Before == "none" || s.Before == "normal" || s.Before == "" || !strings.Contains(s.Text, s.State) {
			t.Errorf("%s %s: icon %s, text %q: want an icon and the state's name, so that it is told apart without colour", s.Where, s.State, s.Before, s.Text)
		}
		if c, ok := colourOf[s.State]; ok && c != s.Background {
			t.Errorf("state %s is %s in one place and %s in another", s.State, c, s.Background)
		}
		colourOf[s.State] = s.Background
		if s.Where == "all" && !s.Fallback {
			listed[s.State] = true
		}
	}
	byColour := map[string]string{}
	for st, c := range colourOf {
		if other, ok := byColour[c]; ok {
			t.Errorf("states %s and %s share the colour %s", st, other, c)
		}
		byColour[c] = st
	}
	for _, st := range readinessStates {
		if !listed[st] {
			t.Errorf("state %s has no colour class of its own in the page's list of every state", st)
		}
	}
	t.Logf("%d elements drawn in %d states' colours checked", len(styles), len(colourOf))
}
