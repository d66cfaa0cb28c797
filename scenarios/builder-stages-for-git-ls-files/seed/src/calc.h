int add(int, int);
