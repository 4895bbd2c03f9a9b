package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// groupOrder is the order of groups in the text report.
var groupOrder = []string{GroupHardware, GroupDriver, GroupWindows, GroupAccess, GroupNPU, GroupLimits, GroupRuntime}

// WriteJSON writes the report as indented JSON. Field names are stable:
// ready, os, summary, npu, checks[].{id,title,group,status,found,need,fix},
// routes[].{models,via,ready,status,fix}.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person: the verdict first, then the
// checks by group, with what was found, what is needed and the fix for
// every check that did not pass.
func WriteText(w io.Writer, r *Report) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "NPU check (%s)\n\n%s\n", r.OS, r.Summary)
	// Without an NPU nearly everything is skipped for that one reason:
	// show the checks that ran and count the rest.
	groups := map[string][]Check{}
	hidden := 0
	for _, c := range r.Checks {
		if r.NPU == nil && c.Status == Skipped {
			hidden++
			continue
		}
		groups[c.Group] = append(groups[c.Group], c)
	}
	for _, g := range groupOrder {
		if len(groups[g]) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "\n%s\n", g)
		for _, c := range groups[g] {
			writeCheck(&sb, c)
		}
	}
	if hidden > 0 {
		fmt.Fprintf(&sb, "\n(%d more checks skipped: they need an NPU)\n", hidden)
	}
	writeRoutes(&sb, r.Routes)
	// Fixes in check order, failures first; checks with the same fix share
	// a line. When the hardware itself is missing or unsupported, nothing
	// else is worth doing, so only its fix is listed.
	hardwareOnly := false
	for _, c := range r.Checks {
		if c.Group == GroupHardware && c.Status == Fail {
			hardwareOnly = true
		}
	}
	var fixes []string
	ids := map[string][]string{}
	for _, want := range []Status{Fail, Warn} {
		for _, c := range r.Checks {
			if c.Fix == "" || c.Status != want || (hardwareOnly && c.Group != GroupHardware) {
				continue
			}
			if ids[c.Fix] == nil {
				fixes = append(fixes, c.Fix)
			}
			ids[c.Fix] = append(ids[c.Fix], c.ID)
		}
	}
	if len(fixes) > 0 {
		sb.WriteString("\nWhat to do, in order:\n")
		for i, fix := range fixes {
			fmt.Fprintf(&sb, "%d. [%s] %s\n", i+1, strings.Join(ids[fix], ", "), wrap(fix, 76, "   "))
		}
	}
	if !r.Ready {
		sb.WriteString("\nMeanwhile NPU Chat runs models on the CPU. Run `npuchat check` again after a fix;\n" +
			"`npuchat check --record DIR` saves what it read, to attach to a bug report.\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

var statusLabel = map[Status]string{Pass: "ok  ", Warn: "WARN", Fail: "FAIL", Skipped: "skip"}

func writeCheck(sb *strings.Builder, c Check) {
	fmt.Fprintf(sb, "  [%s] %-4s %-30s %s\n", statusLabel[c.Status], c.ID, c.Title, firstLine(c))
	if c.Status == Fail || c.Status == Warn {
		fmt.Fprintf(sb, "              need: %s\n", wrap(c.Need, 62, "                    "))
	}
}

func firstLine(c Check) string {
	if c.Status == Skipped {
		return "(skipped: " + c.Found + ")"
	}
	return c.Found
}

// wrap breaks s into lines of at most width bytes, indenting the rest. It
// never breaks inside a `command`, so that commands stay copyable.
func wrap(s string, width int, indent string) string {
	var units []string
	inCode := false
	for _, w := range strings.Fields(s) {
		if inCode && len(units) > 0 {
			units[len(units)-1] += " " + w
		} else {
			units = append(units, w)
		}
		if strings.Count(w, "`")%2 == 1 {
			inCode = !inCode
		}
	}
	var out strings.Builder
	n := 0
	for i, w := range units {
		if i > 0 && n+1+len(w) > width {
			out.WriteString("\n" + indent)
			n = 0
		} else if i > 0 {
			out.WriteByte(' ')
			n++
		}
		out.WriteString(w)
		n += len(w)
	}
	return out.String()
}
