#include <stdio.h>
#include "calc.h"
int main(void) {
  if (add(2, 2) != 4) { puts("FAIL add"); return 1; }
  printf("ok (%s)\n", VERSION);
  return 0;
}
