#include <stdio.h>
#include "calc.h"
int main(void) {
    if (add(1, 2) != 3) { puts("FAIL add"); return 1; }
    puts("ok");
    return 0;
}
