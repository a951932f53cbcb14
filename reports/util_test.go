package reports

import (
	"fmt"
	"strconv"
)

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
func sprint(v any) string   { return fmt.Sprintf("%+v", v) }
