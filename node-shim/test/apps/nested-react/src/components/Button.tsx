import { forwardRef, memo } from "react";

type Props = { label: string } & Record<string, unknown>;

// memo(forwardRef(…)) and a props spread onto the element: the usage prop reaches the DOM too, and must
// never overwrite the element's own location.
export const Button = memo(
  forwardRef<HTMLButtonElement, Props>(function Button({ label, ...rest }, ref) {
    return (
      <button ref={ref} className="btn" {...rest}>
        {label}
      </button>
    );
  }),
);
