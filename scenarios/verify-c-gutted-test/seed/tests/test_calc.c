#include <stdio.h>
#include "calc.h"
int main(void) {
  if (add(2, 2) != 4) { puts("FAIL add"); return 1; }
  if (avg(2, 5) != 3) { puts("FAIL avg rounds down"); return 1; }
  puts("ok");
  return 0;
}
